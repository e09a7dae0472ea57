package server

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/artifact"
	"github.com/perfgate/perfgate/internal/web"
)

// ArtifactsConfig is the `artifacts:` section: where the profile traces
// runners upload are kept, and how large one may be.
type ArtifactsConfig struct {
	// Dir holds the files under their SHA-256 (default DATA_DIR/artifacts).
	Dir string `yaml:"dir"`
	// MaxBytes caps one uploaded file (default 256 MiB); a larger upload
	// is refused with 413 and the runner says so in the job's log.
	MaxBytes int64 `yaml:"max_bytes"`
}

// openArtifacts opens the artifact directory the config names. A server
// assembled without a data directory (tests, embedders; Prepare always
// sets one) and no artifacts.dir keeps none: uploads are answered 501.
func openArtifacts(cfg Config, log zerolog.Logger) (*artifact.Dir, error) {
	dir := cfg.Artifacts.Dir
	switch {
	case dir == "" && cfg.DataDir == "":
		log.Warn().Msg("no data directory and no artifacts.dir: profile traces cannot be uploaded")
		return nil, nil
	case dir == "":
		dir = filepath.Join(cfg.DataDir, "artifacts")
	}
	d, err := artifact.NewDir(dir, cfg.Artifacts.MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("artifacts (PERFGATE_ARTIFACTS_DIR): %w", err)
	}
	return d, nil
}

// traceFiles gives the dispatcher the artifact directory's files as
// readers.
type traceFiles struct{ d *artifact.Dir }

func (t traceFiles) Open(sum string) (io.ReadCloser, error) {
	if t.d == nil {
		return nil, errors.New("this server keeps no artifacts")
	}
	return t.d.Open(sum)
}

// artifactParts are the artifact directory as the agent API and the
// dashboard take it: nil interfaces when there is none.
func artifactParts(d *artifact.Dir) (agentapi.ArtifactFiles, web.ArtifactFiles) {
	if d == nil {
		return nil, nil
	}
	return d, d
}

func artifactsMaxBytes(c *Config, v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1024 {
		return fmt.Errorf("%q: want a number of bytes of at least 1024", v)
	}
	c.Artifacts.MaxBytes = n
	return nil
}
