package approval

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"
)

// maxBody bounds a POST body; a decision is a few dozen bytes.
const maxBody = 64 << 10

// Handler serves the approvals as JSON for a dashboard:
//
//	GET    /approvals                  {"pending":[Request...]}
//	POST   /approvals/{id}             {"decision":"allow"|"deny","scope":"once"|"session"|"always"}
//	GET    /approvals/remembered       {"remembered":[Remembered...]}
//	DELETE /approvals/remembered/{id}
//
// POST answers 200 {"ok":true}, 404 for an unknown request, 409 for one
// decided already, 400 for a malformed body, 413 for a body over 64 KiB
// and 415 unless the body is declared application/json (which also keeps
// plain HTML forms from posting cross-site). Decisions made here are By
// "web". The handler does no authentication: the caller mounts it behind
// its own.
func (b *Broker) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /approvals", b.servePending)
	mux.HandleFunc("POST /approvals/{id}", b.serveDecide)
	mux.HandleFunc("GET /approvals/remembered", b.serveRemembered)
	mux.HandleFunc("DELETE /approvals/remembered/{id}", b.serveRevoke)
	return mux
}

func (b *Broker) servePending(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"pending": nonNil(b.Pending())})
}

func (b *Broker) serveRemembered(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"remembered": nonNil(b.Remembered())})
}

// webDecision is the POST body.
type webDecision struct {
	Decision string `json:"decision"`
	Scope    string `json:"scope"`
}

func (b *Broker) serveDecide(w http.ResponseWriter, r *http.Request) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "body must be application/json")
		return
	}
	var body webDecision
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "body over 64 KiB")
			return
		}
		writeError(w, http.StatusBadRequest, "body is not a decision")
		return
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "body holds more than one decision")
		return
	}
	d := Decision{Scope: body.Scope, By: "web"}
	switch body.Decision {
	case "allow":
		d.Allow = true
	case "deny":
	default:
		writeError(w, http.StatusBadRequest, `decision must be "allow" or "deny"`)
		return
	}
	writeDecideResult(w, b.Decide(r.PathValue("id"), d))
}

func writeDecideResult(w http.ResponseWriter, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	case errors.Is(err, ErrUnknown):
		writeError(w, http.StatusNotFound, "no such pending approval")
	case errors.Is(err, ErrDecided):
		writeError(w, http.StatusConflict, "approval already decided")
	case errors.Is(err, ErrCancelled):
		writeError(w, http.StatusGone, "approval request cancelled: its call is gone")
	case errors.Is(err, ErrBadScope):
		writeError(w, http.StatusBadRequest, err.Error()) // the scope, and why it does not apply
	default:
		// Storage failure: the call was denied. No detail for the client.
		writeError(w, http.StatusInternalServerError, "recording the decision failed; the call was denied")
	}
}

func (b *Broker) serveRevoke(w http.ResponseWriter, r *http.Request) {
	err := b.Revoke(r.PathValue("id"))
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	case errors.Is(err, ErrUnknown):
		writeError(w, http.StatusNotFound, "no such remembered approval")
	default:
		writeError(w, http.StatusInternalServerError, "revoking failed")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// nonNil makes an empty list encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
