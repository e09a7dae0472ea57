// Command perfgate measures LLM inference performance and gates pull
// requests on it. Each subcommand lives in its own file in this package and
// registers itself in commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/logging"
)

// command is one subcommand. run receives the arguments after the
// subcommand name and returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) int
}

// cliEnv is what every subcommand gets: its streams and logger.
type cliEnv struct {
	stdout io.Writer
	stderr io.Writer
	log    zerolog.Logger
}

// commands is filled by init functions in this package's other files.
var commands = map[string]command{}

func register(name string, c command) {
	if _, dup := commands[name]; dup {
		panic("perfgate: command registered twice: " + name)
	}
	commands[name] = c
}

func main() {
	os.Exit(mainArgs(os.Args[1:], os.Stdout, os.Stderr))
}

func mainArgs(args []string, stdout, stderr io.Writer) int {
	global := flag.NewFlagSet("perfgate", flag.ContinueOnError)
	global.SetOutput(stderr)
	level := global.String("log-level", envOr("PERFGATE_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	global.Usage = func() { usage(stderr) }
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 3
	}
	rest := global.Args()
	if len(rest) == 0 {
		usage(stderr)
		return 3
	}
	name, cmdArgs := rest[0], rest[1:]
	if name == "help" {
		usage(stdout)
		return 0
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "perfgate: unknown command %q\n\n", name)
		usage(stderr)
		return 3
	}
	log, err := logging.New(stderr, *level)
	if err != nil {
		fmt.Fprintf(stderr, "perfgate: %v\n", err)
		return 3
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = log.WithContext(ctx)
	return c.run(ctx, &cliEnv{stdout: stdout, stderr: stderr, log: log}, cmdArgs)
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: perfgate [--log-level LEVEL] COMMAND [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'perfgate COMMAND -h' for a command's flags.\n")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
