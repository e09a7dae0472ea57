package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/engine"
)

// StartOllama starts the real engine of the demo repository's main
// outside a runner, for measurements of the client itself: main's files
// are written to dir and its inference_engine/serve.sh is started the way
// the runner starts it (own process group, a free port, ready when
// /v1/models lists the model). Stop the server when done.
func StartOllama(ctx context.Context, dir, ollama string, log zerolog.Logger) (*engine.Server, error) {
	if err := WriteOllamaMain(dir); err != nil {
		return nil, err
	}
	srv, err := engine.Start(ctx, engine.Spec{
		Command:       []string{"bash", "{{.Workdir}}/inference_engine/serve.sh", "{{.Port}}"},
		Model:         ollamaModel,
		ReadinessPath: "/api/version",
		StartTimeout:  5 * time.Minute,
		StopGrace:     10 * time.Second,
		Workdir:       dir,
		Env:           map[string]string{ollamaEnv: ollama},
	}, log)
	if err != nil {
		return nil, fmt.Errorf("start ollama from %s: %w", dir, err)
	}
	return srv, nil
}

// OllamaModel is the model id the demo's engine serves.
const OllamaModel = ollamaModel

// WriteOllamaMain writes the files of the demo repository's main (the
// real engine's layout) to dir.
func WriteOllamaMain(dir string) error {
	l, err := ollamaLayout()
	if err != nil {
		return err
	}
	for name, body := range l.main {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("write the ollama repository: %w", err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil { //nolint:gosec // a checkout, world-readable: the sandbox's nobody reads it
			return fmt.Errorf("write the ollama repository: %w", err)
		}
	}
	return nil
}

// OllamaImageArgs is the server.args of an image engine built by
// BuildOllamaImage: the checkout's serve.sh on the container's port.
var OllamaImageArgs = []string{"bash", "{{.Workdir}}/inference_engine/serve.sh", "{{.Port}}"}

// OllamaImageSpec is the engine spec the runner builds for the demo
// repository with server.image set to image (BuildOllamaImage's Pin or
// ID) instead of server.command: the checkout read-only at /workspace,
// the container in the sandbox behind relayImage, the model created by
// serve.sh under the container's /tmp.
func OllamaImageSpec(dir, image, relayImage, job string) engine.Spec {
	return engine.Spec{
		Image:         image,
		Args:          OllamaImageArgs,
		Model:         ollamaModel,
		ReadinessPath: "/api/version",
		StartTimeout:  5 * time.Minute,
		StopGrace:     10 * time.Second,
		Workdir:       dir,
		JobID:         job,
		Agent:         "demo",
		NoGPU:         true,
		RelayImage:    relayImage,
	}
}
