package kube

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Resource is one kind of object of the API: where its collection is.
type Resource struct {
	// API is "/api/v1" for the core group, "/apis/GROUP/VERSION" else.
	API string
	// Plural is the collection's name: "pods", "networkpolicies".
	Plural string
	// Cluster: the resource is not namespaced.
	Cluster bool
}

// The resources mcpbox uses.
var (
	Pods            = Resource{API: "/api/v1", Plural: "pods"}
	Secrets         = Resource{API: "/api/v1", Plural: "secrets"}
	ConfigMaps      = Resource{API: "/api/v1", Plural: "configmaps"}
	Services        = Resource{API: "/api/v1", Plural: "services"}
	PVCs            = Resource{API: "/api/v1", Plural: "persistentvolumeclaims"}
	Namespaces      = Resource{API: "/api/v1", Plural: "namespaces", Cluster: true}
	NetworkPolicies = Resource{API: "/apis/networking.k8s.io/v1", Plural: "networkpolicies"}
	Deployments     = Resource{API: "/apis/apps/v1", Plural: "deployments"}
	Leases          = Resource{API: "/apis/coordination.k8s.io/v1", Plural: "leases"}
	RuntimeClasses  = Resource{API: "/apis/node.k8s.io/v1", Plural: "runtimeclasses", Cluster: true}
	AccessReviews   = Resource{API: "/apis/authorization.k8s.io/v1", Plural: "selfsubjectaccessreviews", Cluster: true}
	SelfReviews     = Resource{API: "/apis/authentication.k8s.io/v1", Plural: "selfsubjectreviews", Cluster: true}
)

func (r Resource) path(ns, name string) string {
	p := r.API
	if !r.Cluster {
		p += "/namespaces/" + url.PathEscape(ns)
	}
	p += "/" + r.Plural
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

// Create creates obj in namespace ns and decodes the created object into
// out (which may be obj).
func (c *Client) Create(ctx context.Context, r Resource, ns string, obj, out any) error {
	if err := c.do(ctx, "POST", r.path(ns, ""), nil, obj, "", out); err != nil {
		return fmt.Errorf("creating %s: %w", r.Plural, err)
	}
	return nil
}

// Update replaces the object (its resourceVersion must be current).
func (c *Client) Update(ctx context.Context, r Resource, ns, name string, obj, out any) error {
	if err := c.do(ctx, "PUT", r.path(ns, name), nil, obj, "", out); err != nil {
		return fmt.Errorf("updating %s %s: %w", r.Plural, name, err)
	}
	return nil
}

// Patch applies a JSON merge patch to the object.
func (c *Client) Patch(ctx context.Context, r Resource, ns, name string, patch any, out any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := c.do(ctx, "PATCH", r.path(ns, name), nil, data, "application/merge-patch+json", out); err != nil {
		return fmt.Errorf("patching %s %s: %w", r.Plural, name, err)
	}
	return nil
}

// Get reads one object into out.
func (c *Client) Get(ctx context.Context, r Resource, ns, name string, out any) error {
	if err := c.do(ctx, "GET", r.path(ns, name), nil, nil, "", out); err != nil {
		return fmt.Errorf("reading %s %s: %w", r.Plural, name, err)
	}
	return nil
}

// Delete deletes one object; its dependents go in the background (the
// garbage collector). A missing object is not an error.
func (c *Client) Delete(ctx context.Context, r Resource, ns, name string) error {
	return c.deleteWith(ctx, r, ns, name, nil)
}

// DeleteNow deletes one object with no grace period (a pod's processes
// are killed at once). A missing object is not an error.
func (c *Client) DeleteNow(ctx context.Context, r Resource, ns, name string) error {
	zero := int64(0)
	return c.deleteWith(ctx, r, ns, name, &zero)
}

func (c *Client) deleteWith(ctx context.Context, r Resource, ns, name string, grace *int64) error {
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "v1"},
		PropagationPolicy: &bg, GracePeriodSeconds: grace}
	err := c.do(ctx, "DELETE", r.path(ns, name), nil, opts, "", nil)
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", r.Plural, name, err)
	}
	return nil
}

// List reads the objects of namespace ns matching the label selector
// (e.g. "mcpbox.dev/gateway=abc") into out, a *XxxList.
func (c *Client) List(ctx context.Context, r Resource, ns, selector string, out any) error {
	q := url.Values{}
	if selector != "" {
		q.Set("labelSelector", selector)
	}
	if err := c.do(ctx, "GET", r.path(ns, ""), q, nil, "", out); err != nil {
		return fmt.Errorf("listing %s: %w", r.Plural, err)
	}
	return nil
}

// event is one line of a watch.
type event struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// errWatchEnded: the watch's time ran out before the condition held.
var errWatchEnded = errors.New("watch ended")

// WatchPod watches pod name until done returns true or an error, or ctx
// ends. The watch is bounded: each request asks the server to end it
// after timeout seconds, and it is renewed from the last resourceVersion
// until ctx ends. A deleted pod is an error.
func (c *Client) WatchPod(ctx context.Context, ns, name string, done func(*corev1.Pod) (bool, error)) (*corev1.Pod, error) {
	var pod corev1.Pod
	if err := c.Get(ctx, Pods, ns, name, &pod); err != nil {
		return nil, err
	}
	if ok, err := done(&pod); err != nil || ok {
		return &pod, err
	}
	rv := pod.ResourceVersion
	seen := &pod // the pod as last seen, for the error of a wait that ends
	for {
		var last *corev1.Pod
		newRV, err := c.watchOnce(ctx, Pods, ns, "metadata.name="+name, rv, 60*time.Second, func(typ string, raw json.RawMessage) (bool, error) {
			var p corev1.Pod
			if err := json.Unmarshal(raw, &p); err != nil {
				return false, err
			}
			if typ == "DELETED" {
				return false, fmt.Errorf("pod %s was deleted", name)
			}
			last = &p
			return done(&p)
		})
		if last != nil {
			seen = last
		}
		if err == nil {
			return last, nil
		}
		if ctx.Err() != nil {
			// Why it is not there yet, as the cluster says: unschedulable,
			// an image pulling, a container waiting.
			return last, fmt.Errorf("waiting for pod %s (%s): %w", name, PodState(seen), context.Cause(ctx))
		}
		if !errors.Is(err, errWatchEnded) {
			return last, err
		}
		rv = newRV
	}
}

// PodState says where a pod stands, as the cluster reports it: its phase,
// its conditions that do not hold (with their reason and message: the
// scheduler's "0/3 nodes are available: ..."), and its containers that
// wait (ContainerCreating, ImagePullBackOff, ...). Cut to 400 bytes.
func PodState(p *corev1.Pod) string {
	parts := []string{"phase " + cmp.Or(string(p.Status.Phase), "unknown")}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionFalse || c.Reason == "" {
			continue
		}
		s := fmt.Sprintf("%s: %s", c.Type, c.Reason)
		if c.Message != "" {
			s += ": " + c.Message
		}
		parts = append(parts, s)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			s := fmt.Sprintf("container %s waiting: %s", cs.Name, w.Reason)
			if w.Message != "" {
				s += ": " + w.Message
			}
			parts = append(parts, s)
		}
	}
	s := strings.Join(parts, "; ")
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// watchOnce runs one watch request from rv; it returns nil when each said
// done, errWatchEnded (and the last resourceVersion seen) when the
// server ended the watch first.
func (c *Client) watchOnce(ctx context.Context, r Resource, ns, fieldSel, rv string, timeout time.Duration, each func(string, json.RawMessage) (bool, error)) (string, error) {
	q := url.Values{"watch": {"1"}, "resourceVersion": {rv}, "allowWatchBookmarks": {"true"},
		"timeoutSeconds": {strconv.Itoa(int(timeout / time.Second))}}
	if fieldSel != "" {
		q.Set("fieldSelector", fieldSel)
	}
	resp, err := c.send(ctx, "GET", r.path(ns, ""), q, nil, "")
	if err != nil {
		return rv, fmt.Errorf("watching %s: %w", r.Plural, err)
	}
	defer resp.Body.Close()
	stop := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer stop()
	err = readLines(resp.Body, func(line []byte) (bool, error) {
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil {
			return false, fmt.Errorf("decoding watch event: %w", err)
		}
		var meta struct {
			metav1.ObjectMeta `json:"metadata"`
		}
		_ = json.Unmarshal(ev.Object, &meta)
		if meta.ResourceVersion != "" {
			rv = meta.ResourceVersion
		}
		switch ev.Type {
		case "BOOKMARK":
			return false, nil
		case "ERROR":
			var st metav1.Status
			_ = json.Unmarshal(ev.Object, &st)
			if st.Code == 410 { // expired: start again from now
				rv = ""
				return false, errWatchEnded
			}
			return false, &StatusError{Code: int(st.Code), Reason: string(st.Reason), Message: st.Message}
		}
		return each(ev.Type, ev.Object)
	})
	if err != nil && (errors.Is(err, errWatchEnded) || ctx.Err() == nil && isEOF(err)) {
		return rv, errWatchEnded
	}
	if err != nil && ctx.Err() != nil {
		return rv, errWatchEnded
	}
	return rv, err
}

func isEOF(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

func decodeB64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

type atomicCounter struct{ n atomic.Int64 }

func (a *atomicCounter) add(d int64) { a.n.Add(d) }
func (a *atomicCounter) load() int64 { return a.n.Load() }
