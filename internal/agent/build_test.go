package agent

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/source"
)

// A pull request's Dockerfile reaches no network: not through ADD <url>,
// which Docker's classic builder fetches from the daemon whatever
// --network says, nor through a FROM or COPY --from image the daemon would
// pull. A listener on the host must see no request, and the build fails
// saying why. Needs a Docker daemon (skips without one, fails under CI).
func TestBuildReachesNoNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs a Docker daemon")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("no Docker daemon (%v: %s)", err, bytes.TrimSpace(out))
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var hits atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintln(w, "the runner's secret")
	})}
	go srv.Serve(ln)
	defer srv.Close()
	host := ln.Addr().String()

	for _, tc := range []struct {
		name, dockerfile, says string
	}{
		{"ADD url", "FROM scratch\nADD http://" + host + "/secret /secret\n", "fetches a URL"},
		{"ADD escaped url", "FROM scratch\nADD http:\\/\\/" + host + "/secret /secret\n", "quotes or escapes"},
		{"ADD quoted url", "FROM scratch\nADD 'http:'//" + host + "/secret /secret\n", "quotes or escapes"},
		{"FROM a registry on the host", "FROM " + host + "/evil:latest\n", "not on this runner"},
		{"COPY --from a registry on the host", "FROM scratch\nCOPY --from=" + host + "/evil:latest /x /x\n", "names an image"},
		{"allowed", "FROM scratch\nCOPY Dockerfile /Dockerfile\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			dir := filepath.Join(home, "tree")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(tc.dockerfile), 0o644); err != nil {
				t.Fatal(err)
			}
			tag := fmt.Sprintf("perfgate-build-net-test:%d", time.Now().UnixNano())
			defer exec.Command("docker", "image", "rm", "-f", tag).Run()
			a := &Agent{cfg: Config{Docker: "docker"}}
			plan := agentapi.Plan{Engine: agentapi.Engine{Build: &agentapi.Build{Command: []string{"docker", "build", "--quiet", "-t", tag, "."}, Image: tag}}}
			s := &side{sha: "0123456789012345678901234567890123456789", checkout: &source.Checkout{Dir: dir, Home: home}}
			id, err := a.build(ctx, &agentapi.ClaimResponse{JobID: 1}, plan, s, "", zerolog.Nop())
			if n := hits.Load(); n != 0 {
				t.Fatalf("the host listener saw %d requests from the build", n)
			}
			if tc.says == "" {
				if err != nil || !strings.HasPrefix(id, "sha256:") {
					t.Fatalf("build: %q, %v", id, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("build err = %v, want a refusal saying %q", err, tc.says)
			}
		})
	}
}

// The build's output is capped before the job log and the check run: the
// log keeps the first buildLogLimit bytes and a note, the failure quotes
// the last buildTail.
func TestBuildOutputCapped(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	tail := &tailWriter{max: buildTail}
	w := &cappedWriter{w: &log, left: buildLogLimit, tail: tail}
	line := bytes.Repeat([]byte("x"), 999)
	line = append(line, '\n')
	for range 5000 { // 5 MB
		w.Write(line)
	}
	w.Write([]byte("the last line\n"))
	if log.Len() > buildLogLimit+200 || !strings.Contains(log.String(), "the rest is not kept") {
		t.Errorf("log kept %d bytes (limit %d), note present %v", log.Len(), buildLogLimit, strings.Contains(log.String(), "not kept"))
	}
	if got := tail.String(); len(got) > buildTail || !strings.HasSuffix(got, "the last line") {
		t.Errorf("tail is %d bytes, ends %q", len(got), got[max(0, len(got)-20):])
	}
}
