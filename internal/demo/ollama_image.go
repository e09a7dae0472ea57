package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// OllamaImageTag is the tag BuildOllamaImage gives the engine image.
const OllamaImageTag = "perfgate-ollama:" + OllamaVersion

// ollamaImageTools are the programs the image holds beside ollama: bash
// and the coreutils inference_engine/serve.sh runs.
var ollamaImageTools = []string{"bash", "dirname", "mktemp", "seq", "sleep", "rm", "tail", "env", "cat", "ls"}

// ollamaEntrypoint is the image's entrypoint. The runner starts an image
// engine as `IMAGE --model MODEL ARGS...`; the model is the checkout's to
// create, so the entrypoint drops --model and runs ARGS (the repository's
// server.args: bash {{.Workdir}}/inference_engine/serve.sh {{.Port}},
// rendered as /workspace/... 8000 inside the container).
const ollamaEntrypoint = `#!/usr/bin/bash
# perfgate's runner starts an image engine as IMAGE --model MODEL ARGS...;
# the checkout's serve.sh creates the model, so --model is dropped and ARGS
# run (server.args in .github/perfgate.yml).
set -euo pipefail
if [ "${1:-}" = --model ]; then shift 2; fi
[ "$#" -gt 0 ] || { echo "perfgate-ollama: no command: set server.args, e.g. [bash, '{{.Workdir}}/inference_engine/serve.sh', '{{.Port}}']" >&2; exit 2; }
exec "$@"
`

// ollamaDockerfile packs the staged root filesystem into an image FROM
// scratch: nothing comes from a registry. ENGINE_BIND makes serve.sh
// listen on the container's address, where the sandbox's relay reaches it
// (outside a container it listens on 127.0.0.1).
const ollamaDockerfile = `FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin OLLAMA_BIN=/usr/local/bin/ollama ENGINE_BIND=0.0.0.0 HOME=/tmp TMPDIR=/tmp
USER 65534:65534
ENTRYPOINT ["/usr/bin/bash", "/usr/local/bin/perfgate-engine"]
`

// lddPath is a library path in ldd's output: "name => /path (0x...)" or
// "/lib64/ld-linux-x86-64.so.2 (0x...)".
var lddPath = regexp.MustCompile(`(?m)(?:=>\s+|^\s+)(/\S+)\s+\(0x`)

// SharedLibraries lists the absolute paths of the shared libraries ldd
// names for bin (the dynamic loader included).
func SharedLibraries(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", bin).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", bin, err, strings.TrimSpace(string(out)))
	}
	libs, missing := parseLDD(string(out))
	if len(missing) > 0 {
		return nil, fmt.Errorf("ldd %s: %s not found on this host, so the image could not run it", bin, strings.Join(missing, ", "))
	}
	return libs, nil
}

// lddMissing is a library ldd could not resolve: "name => not found".
var lddMissing = regexp.MustCompile(`(?m)^\s*(\S+)\s+=>\s+not found`)

// parseLDD reads ldd's output: the resolved path of every library and the
// loader (vdso lines name no file), and the libraries not found.
func parseLDD(out string) (libs, missing []string) {
	for _, m := range lddPath.FindAllStringSubmatch(out, -1) {
		libs = append(libs, m[1])
	}
	for _, m := range lddMissing.FindAllStringSubmatch(out, -1) {
		missing = append(missing, m[1])
	}
	return libs, missing
}

// OllamaImage is what BuildOllamaImage made.
type OllamaImage struct {
	ID    string // sha256:<64 hex>, the local image ID
	Tag   string // OllamaImageTag
	Pin   string // tag@sha256:<id>: the server.image a repository writes
	Size  int64  // bytes, as docker image inspect reports
	Files []string
}

// BuildOllamaImage makes the real engine's image with no registry: the
// host's ollama binary, bash and a few coreutils, each with the shared
// libraries ldd names, staged as a root filesystem and built FROM scratch
// (docker build). It runs as nobody; the checkout's serve.sh starts
// `ollama serve` and creates the model under the sandbox's /tmp.
func BuildOllamaImage(ctx context.Context, docker, ollama string) (OllamaImage, error) {
	if docker == "" {
		docker = "docker"
	}
	dir, err := os.MkdirTemp("", "perfgate-ollama-image-")
	if err != nil {
		return OllamaImage{}, fmt.Errorf("ollama image: %w", err)
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "rootfs")
	files := map[string]string{} // path in the image -> host file
	files["/usr/local/bin/ollama"] = ollama
	bins := []string{ollama}
	for _, tool := range ollamaImageTools {
		p, err := exec.LookPath(tool)
		if err != nil {
			return OllamaImage{}, fmt.Errorf("ollama image: %s: %w", tool, err)
		}
		files["/usr/bin/"+tool] = p
		bins = append(bins, p)
	}
	for _, b := range bins {
		libs, err := SharedLibraries(ctx, b)
		if err != nil {
			return OllamaImage{}, fmt.Errorf("ollama image: %w", err)
		}
		for _, l := range libs {
			files[l] = l
		}
	}
	var names []string
	for dst, src := range files {
		// Copied by content under the name ldd gave (symlinks resolved).
		if err := copyFile(src, filepath.Join(root, dst), 0o755); err != nil {
			return OllamaImage{}, fmt.Errorf("ollama image: %w", err)
		}
		names = append(names, dst)
	}
	extra := map[string]string{ //nolint:gosec // the image's /etc/passwd: account names, no secret
		"usr/local/bin/perfgate-engine": ollamaEntrypoint,
		"etc/passwd":                    "root:x:0:0:root:/root:/usr/bin/bash\nnobody:x:65534:65534:nobody:/tmp:/usr/bin/bash\n",
		"etc/group":                     "root:x:0:\nnogroup:x:65534:\n",
		"Dockerfile":                    ollamaDockerfile,
	}
	for name, body := range extra {
		p := filepath.Join(root, name)
		if name == "Dockerfile" {
			p = filepath.Join(dir, name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return OllamaImage{}, fmt.Errorf("ollama image: %w", err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil { //nolint:gosec // an image's files, world-readable by design
			return OllamaImage{}, fmt.Errorf("ollama image: %w", err)
		}
	}
	// Mount points. No /tmp: the sandbox mounts its tmpfs there, and an
	// image's own /tmp would lend the tmpfs its mode (0755, root's), which
	// nobody cannot write.
	for _, d := range []string{"workspace", "models"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return OllamaImage{}, fmt.Errorf("ollama image: %w", err)
		}
	}
	sort.Strings(names)
	bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(bctx, docker, "build", "--quiet", "--label", "perfgate.engine=ollama-"+OllamaVersion, "--tag", OllamaImageTag, dir).CombinedOutput(); err != nil {
		return OllamaImage{}, fmt.Errorf("ollama image: docker build: %w: %s", err, strings.TrimSpace(string(out)))
	}
	out, err := exec.CommandContext(ctx, docker, "image", "inspect", "--format", "{{.Id}} {{.Size}}", OllamaImageTag).Output()
	if err != nil {
		return OllamaImage{}, fmt.Errorf("ollama image: docker image inspect %s: %w", OllamaImageTag, err)
	}
	img := OllamaImage{Tag: OllamaImageTag, Files: names}
	if _, err := fmt.Sscan(string(out), &img.ID, &img.Size); err != nil {
		return OllamaImage{}, fmt.Errorf("ollama image: docker image inspect %s: %q: %w", OllamaImageTag, out, err)
	}
	img.Pin = OllamaImageTag + "@" + img.ID
	return img, nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src) //nolint:gosec // the host's own binaries and libraries, named by ldd
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode) //nolint:gosec // executables and libraries of the image
}
