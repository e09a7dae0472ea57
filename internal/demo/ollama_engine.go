package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/engine"
)

// StartOllama starts the real engine of the demo repository's main
// outside a runner, for measurements of the client itself: main's files
// are written to dir and its inference_engine/serve.sh is started the way
// the runner starts it (own process group, a free port, ready when
// /v1/models lists the model). Stop the server when done.
func StartOllama(ctx context.Context, dir, ollama string, log zerolog.Logger) (*engine.Server, error) {
	l, err := ollamaLayout()
	if err != nil {
		return nil, err
	}
	for name, body := range l.main {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("start ollama: %w", err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return nil, fmt.Errorf("start ollama: %w", err)
		}
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
