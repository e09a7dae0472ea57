// Package logging configures the process-wide zerolog logger: a console
// writer when stderr is a terminal, JSON lines otherwise.
package logging

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"
)

// New returns a logger writing to w at the named level ("debug", "info",
// "warn", "error"). A terminal gets human-readable output; anything else
// (a pipe, a file, a log collector) gets one JSON object per line.
func New(w io.Writer, level string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("log level %q: want one of debug, info, warn, error", level)
	}
	out := w
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.Kitchen}
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger(), nil
}
