package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

func init() {
	register("healthcheck", command{summary: "probe a running server's /healthz (for images without a shell or curl)", run: runHealthcheck})
}

// runHealthcheck exits 0 when the server answers 2xx. The server image is
// distroless, so its HEALTHCHECK runs the binary itself.
func runHealthcheck(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("healthcheck", "[--url URL] [--timeout 3s]")
	def := "http://127.0.0.1" + portOf(envOr("PERFGATE_ADDR", ":8080")) + "/healthz"
	url := fs.String("url", def, "URL to probe (default: /healthz on the port of $PERFGATE_ADDR)")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate healthcheck: %v\n", err)
		return 3
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate healthcheck: %v\n", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(env.stderr, "perfgate healthcheck: %s answered %s\n", *url, resp.Status)
		return 1
	}
	return 0
}

// portOf returns ":PORT" of a listen address, ":8080" when it has none.
func portOf(addr string) string {
	if _, port, err := net.SplitHostPort(addr); err == nil && port != "" {
		return ":" + port
	}
	return ":8080"
}
