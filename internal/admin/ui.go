package admin

import "errors"

// The ui op starts the dashboard of an instance that has no HTTP
// listener (a stdio-only serve) on a loopback listener, on demand
// (`mcpbox ui`), and answers its base URL.

// SetUI gives the server what the ui op runs: f starts the dashboard's
// loopback listener (once; later calls answer the same URL) and returns
// its base URL ("http://127.0.0.1:PORT"). Nil: the op fails.
func (s *Server) SetUI(f func() (string, error)) {
	s.mu.Lock()
	s.ui = f
	s.mu.Unlock()
}

// SetUI is Server.SetUI of the instance's admin server.
func (i *Instance) SetUI(f func() (string, error)) { i.srv.SetUI(f) }

func serveUI(s *Server, _ *call) (reply, error) {
	s.mu.Lock()
	f := s.ui
	s.mu.Unlock()
	if f == nil {
		return reply{}, errors.New("this mcpbox serve starts no dashboard listener on demand")
	}
	u, err := f()
	return reply{UI: u}, err
}

// UI asks an instance of the state dir to start its dashboard's loopback
// listener (a stdio-only serve) and returns its base URL.
func (c Client) UI() (string, error) {
	rep, err := c.one(request{Op: opUI})
	return rep.UI, err
}
