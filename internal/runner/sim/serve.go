package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// DefaultAddr is where Serve listens when addr is empty: loopback, any port.
const DefaultAddr = "127.0.0.1:0"

// shutdownGrace bounds how long Serve waits for connections after the
// engine has ended their streams.
const shutdownGrace = 5 * time.Second

// Serve runs an engine on addr until ctx is done. ready, if non-nil, gets the
// bound address (useful with port 0) once the listener accepts connections.
// On shutdown the engine closes first, so /health turns 503 and open streams
// end, then the HTTP server drains.
func Serve(ctx context.Context, cfg Config, addr string, ready func(boundAddr string)) error {
	if addr == "" {
		addr = DefaultAddr
	}
	e, err := New(cfg)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		_ = e.Close()
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr().String())
	}

	select {
	case err := <-served:
		_ = e.Close()
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	closeErr := e.Close()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shut down sim server: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	}
	return closeErr
}
