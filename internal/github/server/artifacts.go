package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/github/artifact"
	"github.com/perfgate/perfgate/internal/github/web"
	"github.com/perfgate/perfgate/internal/store"
)

// ArtifactsConfig is the `artifacts:` section: where the profile traces
// runners upload are kept, and how large one may be.
type ArtifactsConfig struct {
	// Dir holds the files under their SHA-256 (default DATA_DIR/artifacts).
	Dir string `yaml:"dir"`
	// MaxBytes caps one uploaded file (default 256 MiB); a larger upload
	// is refused with 413 and the runner says so in the job's log.
	MaxBytes int64 `yaml:"max_bytes"`
	// Keep is how long an artifact is kept after its upload before the
	// retention sweep deletes its row and, once no row references it, its
	// file (default DefaultArtifactKeep; KeepForever keeps every one).
	Keep Retention `yaml:"keep"`
}

// DefaultArtifactKeep is artifacts.keep when unset: long enough for a PR's
// review, short enough that 256 MiB traces do not fill the disk.
const DefaultArtifactKeep = 30 * 24 * time.Hour

// Retention is a keep period: a Go duration, or days ("30d"); 0 or
// "forever" is KeepForever. The zero value is unset (the default).
type Retention time.Duration

// KeepForever keeps every artifact.
const KeepForever Retention = -1

// Duration is the period in effect: the default when unset, 0 for
// forever.
func (r Retention) Duration() time.Duration {
	switch {
	case r == 0:
		return DefaultArtifactKeep
	case r < 0:
		return 0
	}
	return time.Duration(r)
}

// ParseRetention reads a keep period; under an hour is refused (an upload
// and its row could be swept before the check run links them).
func ParseRetention(v string) (Retention, error) {
	v = strings.TrimSpace(v)
	if v == "0" || strings.EqualFold(v, "forever") {
		return KeepForever, nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(v, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 64)
		if n > 100*365 {
			n = -1
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(v)
	}
	if err == nil && d == 0 {
		return KeepForever, nil // "0s", "0d"
	}
	if err != nil || d < time.Hour {
		return 0, fmt.Errorf("%q: want a period of at least 1h, e.g. 30d or 720h, or 0 or forever to keep every artifact", v)
	}
	return Retention(d), nil
}

// UnmarshalYAML reads artifacts.keep from server.yml.
func (r *Retention) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseRetention(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: artifacts.keep %w", n.Line, err)
	}
	*r = v
	return nil
}

func artifactsKeep(c *Config, v string) error {
	r, err := ParseRetention(v)
	if err != nil {
		return err
	}
	c.Artifacts.Keep = r
	return nil
}

// uploadGrace is how young a file the sweep leaves alone although no row
// references it: an upload in progress (tmp/) or one whose row is being
// written.
const uploadGrace = time.Hour

// artifactSweepEvery is how often the retention sweep runs.
const artifactSweepEvery = time.Hour

// runArtifactSweep sweeps the artifact store now and then every period
// until ctx ends.
func (s *Server) runArtifactSweep(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := s.sweepTurn(ctx, s.now(), every); err != nil && ctx.Err() == nil {
			s.log.Error().Err(err).Msg("sweep artifacts")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// turnRetention is the retention sweep's turn among replicas
// (store.Singletons).
const turnRetention = "artifact-retention"

// sweepTurn sweeps the artifact store if this replica takes the turn of
// the period of length every that at falls in: with several replicas the
// sweep runs once a period, not once per replica. It reports whether it
// swept.
func (s *Server) sweepTurn(ctx context.Context, at time.Time, every time.Duration) (bool, error) {
	if s.arts == nil {
		return false, nil
	}
	period := at.Truncate(every)
	ok, err := s.st.TakeTurn(ctx, turnRetention, period, every)
	if err != nil || !ok {
		return false, err
	}
	if err := s.sweepArtifacts(ctx); err != nil {
		return true, err
	}
	return true, s.st.TurnDone(ctx, turnRetention, period)
}

// sweepArtifacts deletes the artifact rows older than artifacts.keep, then
// the files no remaining row references (a file shared with a newer row
// stays) and abandoned uploads, and logs what it freed. Rows are aged by
// the server's clock, files by their modification time against the wall
// clock: the filesystem's.
func (s *Server) sweepArtifacts(ctx context.Context) error {
	if s.arts == nil {
		return nil
	}
	keep := s.cfg.Artifacts.Keep.Duration()
	var rows []store.Artifact
	if keep > 0 {
		var err error
		if rows, err = s.st.DeleteArtifactsBefore(ctx, s.now().Add(-keep)); err != nil {
			return err
		}
	}
	// Listed after the delete: a row written since only keeps more.
	refs, err := s.st.ArtifactSHA256s(ctx)
	if err != nil {
		return err
	}
	freed, err := s.arts.Sweep(refs, time.Now().Add(-uploadGrace))
	var rowBytes int64
	for _, a := range rows {
		rowBytes += a.Size
	}
	ev := s.log.Debug()
	if len(rows) > 0 || freed != (artifact.SweepStats{}) {
		ev = s.log.Info()
	}
	ev.Str("where", s.arts.Where()).Dur("keep", keep).Int("rows", len(rows)).Int64("row_bytes", rowBytes).
		Int("files", freed.Files).Int64("bytes", freed.Bytes).Int("tmp_files", freed.Temps).Int64("tmp_bytes", freed.TempBytes).
		Int("files_kept", len(refs)).Msg("artifact retention sweep")
	return err
}

// artifactStore is where the server keeps artifact bytes: a directory
// (artifact.Dir) or the database (artifact.DB).
type artifactStore interface {
	Save(r io.Reader) (sum string, size int64, err error)
	Open(sum string) (artifact.File, error)
	MaxBytes() int64
	Sweep(keep map[string]bool, cutoff time.Time) (artifact.SweepStats, error)
	Where() string
}

// openArtifacts opens the artifact store. On a database several replicas
// share (PostgreSQL) the bytes live in it, so a trace uploaded through one
// replica is served and diffed by every other; otherwise in the directory
// the config names. A server assembled without a data directory (tests,
// embedders; Prepare always sets one), no artifacts.dir and no shared
// database keeps none: uploads are answered 501.
func openArtifacts(cfg Config, st store.Store, log zerolog.Logger) (artifactStore, error) {
	if st.Shared() {
		if cfg.Artifacts.Dir != "" {
			log.Warn().Str("dir", cfg.Artifacts.Dir).Msg("artifacts.dir is ignored: on PostgreSQL the artifacts live in the database every replica shares")
		}
		return artifact.NewDB(st, cfg.Artifacts.MaxBytes), nil
	}
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

// traceFiles gives the dispatcher the artifact store's files as readers.
type traceFiles struct{ d artifactStore }

func (t traceFiles) Open(sum string) (io.ReadCloser, error) {
	if t.d == nil {
		return nil, errors.New("this server keeps no artifacts")
	}
	return t.d.Open(sum)
}

// artifactParts are the artifact store as the agent API and the dashboard
// take it: nil interfaces when there is none.
func artifactParts(d artifactStore) (agentserver.ArtifactFiles, web.ArtifactFiles) {
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
