// Package deploy holds perfgate's deployment files (Dockerfile targets are
// at the repository root); its tests check them with the real tools where
// the machine has them: systemd-analyze, docker compose.
package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var units = []string{"systemd/perfgate-agent.service", "systemd/perfgate-server.service"}

// installedUnits copies the units into a directory with ExecStart pointed
// at an executable that exists here (verify checks that it does).
func installedUnits(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(dst, bytes.ReplaceAll(b, []byte("/usr/local/bin/perfgate"), []byte("/bin/true")), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, dst)
	}
	return out
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed here: skipped", name)
	}
	return p
}

func TestSystemdUnitsVerify(t *testing.T) {
	tool := needTool(t, "systemd-analyze")
	files := installedUnits(t)
	cmd := exec.Command(tool, append([]string{"verify", "--man=no"}, files...)...)
	out, err := cmd.CombinedOutput()
	// verify also reports on unrelated units of this machine: only lines
	// naming ours count.
	var ours []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "perfgate") {
			ours = append(ours, line)
		}
	}
	if err != nil || len(ours) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, strings.Join(ours, "\n"))
	}
}

// The units score well below the old 9.2 "UNSAFE" of
// `systemd-analyze security` (1.8 and 1.2 when written).
func TestSystemdUnitsHardened(t *testing.T) {
	tool := needTool(t, "systemd-analyze")
	for _, f := range installedUnits(t) {
		out, err := exec.Command(tool, "security", "--offline=yes", "--no-pager", f).CombinedOutput()
		if err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatal(err)
			}
		}
		m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
		if m == nil {
			if strings.Contains(string(out), "offline") {
				t.Skipf("this systemd-analyze has no --offline: %s", out)
			}
			t.Fatalf("no score in:\n%s", out)
		}
		score, _ := strconv.ParseFloat(string(m[1]), 64)
		t.Logf("%s: exposure %.1f", filepath.Base(f), score)
		if score > 3.0 {
			t.Errorf("%s: exposure %.1f, want ≤ 3.0", filepath.Base(f), score)
		}
	}
}

func TestSystemdUnitsKeepSecretsOffTheCommandLine(t *testing.T) {
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "ExecStart=") && regexp.MustCompile(`--token[ =]|--registration-token|SECRET|PRIVATE_KEY`).MatchString(line) {
				t.Errorf("%s passes a secret on argv: %s", u, line)
			}
		}
		for _, want := range []string{"StateDirectory=", "NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet=\n"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %q", u, strings.TrimSpace(want))
			}
		}
	}
	agent, _ := os.ReadFile("systemd/perfgate-agent.service")
	if !strings.Contains(string(agent), "LoadCredential=registration-token:") || !strings.Contains(string(agent), "--token-file ${CREDENTIALS_DIRECTORY}/registration-token") {
		t.Error("the agent unit does not take its token from a credential file")
	}
	sysusers, err := os.ReadFile("systemd/perfgate.sysusers")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"perfgate", "perfgate-agent"} {
		if !regexp.MustCompile(`(?m)^u\s+` + u + `\s`).Match(sysusers) {
			t.Errorf("sysusers entry for %s missing", u)
		}
	}
	if tool, err := exec.LookPath("systemd-sysusers"); err == nil {
		abs, _ := filepath.Abs("systemd/perfgate.sysusers")
		if out, err := exec.Command(tool, "--dry-run", abs).CombinedOutput(); err != nil {
			t.Errorf("systemd-sysusers --dry-run: %v\n%s", err, out)
		}
	}
}

// composeCommand finds `docker compose` or Debian's docker-compose.
func composeCommand(t *testing.T) []string {
	t.Helper()
	if docker, err := exec.LookPath("docker"); err == nil {
		if exec.Command(docker, "compose", "version").Run() == nil {
			return []string{docker, "compose"}
		}
	}
	if dc, err := exec.LookPath("docker-compose"); err == nil {
		return []string{dc}
	}
	t.Skip("neither `docker compose` nor docker-compose is installed here (apt-get install docker-compose): skipped")
	return nil
}

func TestComposeConfigNeedsItsSecrets(t *testing.T) {
	dc := composeCommand(t)
	run := func(env ...string) (string, error) {
		args := append(dc[1:], "-f", "docker-compose.yml", "config")
		cmd := exec.Command(dc[0], args...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	out, err := run("POSTGRES_PASSWORD=0123456789abcdef", "PERFGATE_PUBLIC_URL=https://perfgate.example.com")
	if err != nil {
		t.Fatalf("config with the secrets set: %v\n%s", err, out)
	}
	if !strings.Contains(out, "https://perfgate.example.com") {
		t.Errorf("interpolated config lacks the public URL:\n%s", out)
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, "POSTGRES_PASSWORD"},
		{[]string{"POSTGRES_PASSWORD=x"}, "PERFGATE_PUBLIC_URL"},
		{[]string{"PERFGATE_PUBLIC_URL=https://p"}, "POSTGRES_PASSWORD"},
	} {
		out, err := run(tc.env...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("config with %v: %v, want a failure naming %s:\n%s", tc.env, err, tc.want, out)
		}
	}
	b, _ := os.ReadFile("docker-compose.yml")
	for _, want := range []string{"healthcheck:", "restart: unless-stopped", "condition: service_healthy", "cap_drop: [ALL]", "read_only: true"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("compose file lacks %q", want)
		}
	}
}

func TestKubernetesManifest(t *testing.T) {
	f, err := os.Open("kubernetes/server.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var deployment map[string]any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if doc["kind"] == "Deployment" {
			deployment = doc
		}
	}
	if deployment == nil {
		t.Fatal("no Deployment")
	}
	pod := dig(deployment, "spec", "template", "spec").(map[string]any)
	if psc := pod["securityContext"].(map[string]any); psc["runAsNonRoot"] != true || dig(psc, "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("pod securityContext %v", psc)
	}
	c := pod["containers"].([]any)[0].(map[string]any)
	image := c["image"].(string)
	if i := strings.LastIndex(image, ":"); i < 0 || strings.HasSuffix(image, ":latest") || strings.Contains(image[i:], "/") {
		t.Errorf("image %q: want a release tag or digest, not latest", image)
	}
	sc := c["securityContext"].(map[string]any)
	if sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true || dig(sc, "capabilities", "drop").([]any)[0] != "ALL" {
		t.Errorf("container securityContext %v", sc)
	}
	if p := dig(c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
		t.Errorf("readiness on %v, want /readyz", p)
	}
	if p := dig(c, "livenessProbe", "httpGet", "path"); p != "/healthz" {
		t.Errorf("liveness on %v, want /healthz", p)
	}
	if dig(c, "resources", "requests", "memory") == nil || dig(c, "resources", "limits", "memory") == nil {
		t.Errorf("resources %v", c["resources"])
	}
	for _, e := range c["env"].([]any) {
		env := e.(map[string]any)
		if name := env["name"].(string); strings.HasSuffix(name, "WEBHOOK_SECRET") || strings.HasSuffix(name, "REGISTRATION_TOKEN") {
			t.Errorf("%s is passed as a value; mount it and use %s_FILE", name, name)
		}
	}
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	// Neither image needs a registry: every stage starts FROM scratch.
	froms := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(df, -1)
	if len(froms) != 2 {
		t.Errorf("%d stages, want two (server, agent)", len(froms))
	}
	for _, line := range froms {
		if line[1] != "scratch" {
			t.Errorf("FROM %s: a base image comes from a registry; start FROM scratch with files prepared on the host", line[1])
		}
	}
	stages := strings.Split(df, "\nFROM ")
	var server, agent string
	for _, s := range stages {
		switch {
		case strings.Contains(s, " AS server\n"):
			server = s
		case strings.Contains(s, " AS agent\n"):
			agent = s
		}
	}
	// The server stage comes first and takes nothing from another stage
	// (Docker's legacy builder builds every stage before the target), its
	// binary static.
	if !strings.HasPrefix(stages[1], "scratch AS server\n") || strings.Contains(server, "--from=") || strings.Contains(server, "\nRUN ") {
		t.Error("the server stage is not the first, FROM scratch, self-contained stage")
	}
	if strings.Contains(agent, "--from=") {
		t.Error("the agent stage takes files from another stage")
	}
	prepare, err := os.ReadFile("image/prepare")
	if err != nil || !strings.Contains(string(prepare), "CGO_ENABLED=0 go build") || !strings.Contains(string(prepare), "/etc/ssl/certs/ca-certificates.crt") {
		t.Errorf("deploy/image/prepare does not build a static binary and copy Debian's CA bundle: %v", err)
	}
	prepareAgent, err := os.ReadFile("image/prepare-agent")
	if err != nil || !strings.Contains(string(prepareAgent), "CGO_ENABLED=1") || !strings.Contains(string(prepareAgent), "-tags nvml") {
		t.Errorf("deploy/image/prepare-agent does not build the agent with cgo and -tags nvml: %v", err)
	}
	if regexp.MustCompile(`(?m)^# *syntax=`).MatchString(df) {
		t.Error("a # syntax= line makes BuildKit fetch its frontend from a registry")
	}
	for name, s := range map[string]string{"server": server, "agent": agent} {
		if !regexp.MustCompile(`(?m)^USER [1-9][0-9]*:[1-9][0-9]*$`).MatchString(s) {
			t.Errorf("%s stage does not run as a numeric non-root user", name)
		}
		if !strings.Contains(s, "HEALTHCHECK") {
			t.Errorf("%s stage has no HEALTHCHECK", name)
		}
	}
	if !strings.Contains(string(prepareAgent), "/usr/local/bin/docker") || !strings.Contains(agent, `"docker", "version"`) {
		t.Error("the agent image has no docker CLI")
	}
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\.git$`).Match(ignore) {
		t.Error(".dockerignore does not keep .git out of the build context")
	}
	for _, f := range []string{"!deploy/image/perfgate", "!deploy/image/ca-certificates.crt", "!deploy/image/data", "!deploy/image/agent", "!deploy/image/agent-state"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(f) + `$`).Match(ignore) {
			t.Errorf(".dockerignore keeps %s (what an image copies) out of the build context", f[1:])
		}
	}
}

func dig(m any, keys ...string) any {
	for _, k := range keys {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[k]
	}
	return m
}

// The containerised agent's state and models directories are mounted at
// the same path on the host and in the container: the host's Docker daemon
// mounts an engine's checkout from the host's path.
func TestAgentStateAtSamePath(t *testing.T) {
	b, err := os.ReadFile("docker-compose.agent.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	same := map[string]bool{}
	for _, v := range compose.Services["agent"].Volumes {
		parts := strings.Split(v, ":")
		same[parts[1]] = parts[0] == parts[1]
	}
	for _, p := range []string{"/var/lib/perfgate-agent", "/srv/models"} {
		if !same[p] {
			t.Errorf("compose: %s is not mounted from the same host path (%v)", p, compose.Services["agent"].Volumes)
		}
	}

	b, err = os.ReadFile("kubernetes/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds map[string]any
	if err := yaml.Unmarshal(b, &ds); err != nil {
		t.Fatal(err)
	}
	pod := dig(ds, "spec", "template", "spec").(map[string]any)
	host := map[string]string{}
	for _, v := range pod["volumes"].([]any) {
		v := v.(map[string]any)
		if hp, ok := v["hostPath"].(map[string]any); ok {
			host[v["name"].(string)] = hp["path"].(string)
		}
	}
	checked := 0
	for _, m := range pod["containers"].([]any)[0].(map[string]any)["volumeMounts"].([]any) {
		m := m.(map[string]any)
		path := m["mountPath"].(string)
		if path != "/var/lib/perfgate-agent" && path != "/srv/models" {
			continue
		}
		checked++
		if host[m["name"].(string)] != path {
			t.Errorf("kubernetes: %s comes from host path %q", path, host[m["name"].(string)])
		}
	}
	if checked != 2 {
		t.Errorf("kubernetes: %d of the state and models mounts found", checked)
	}
}
