// Command perfgate measures LLM inference performance and gates pull
// requests on it. Each subcommand lives in its own file in this package and
// registers itself in commands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/logging"
	"github.com/perfgate/perfgate/internal/vocab/suggest"
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
	// logLevelChosen: --log-level or PERFGATE_LOG_LEVEL set the level (a
	// command may pick another default only when they did not).
	logLevelChosen bool
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
	g, err := splitGlobal(args)
	if err != nil {
		fmt.Fprintf(stderr, "perfgate: %v\nRun 'perfgate -h' for the commands and global flags.\n", err)
		return 3
	}
	switch {
	case g.help:
		usage(stdout)
		return 0
	case g.version:
		writeVersion(stdout)
		return 0
	case g.command == "":
		usage(stderr)
		return 3
	}
	name, cmdArgs := g.command, g.args
	if name == "help" {
		if len(cmdArgs) == 0 {
			usage(stdout)
			return 0
		}
		// "perfgate help bench" is "perfgate bench -h".
		name, cmdArgs = cmdArgs[0], []string{"-h"}
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "perfgate: unknown command %q", name)
		if s := suggest.Closest(name, commandNames()); s != "" {
			fmt.Fprintf(stderr, "; did you mean %q?", s)
		}
		fmt.Fprintf(stderr, "\nRun 'perfgate -h' for the list of commands.\n")
		return 3
	}
	log, err := logging.New(stderr, g.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "perfgate: --log-level: %v\n", err)
		return 3
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = log.WithContext(ctx)
	return c.run(ctx, &cliEnv{stdout: stdout, stderr: stderr, log: log, logLevelChosen: g.logLevelChosen}, cmdArgs)
}

// globalArgs is the command line with the global flags taken out.
type globalArgs struct {
	logLevel       string
	logLevelChosen bool
	help, version  bool
	command        string
	args           []string
}

// splitGlobal takes the global flags out of args. --log-level may stand
// anywhere before a "--"; -h and --version only before the command (after
// it they belong to the command: baseline promote has its own --version).
func splitGlobal(args []string) (globalArgs, error) {
	g := globalArgs{logLevel: envOr("PERFGATE_LOG_LEVEL", "info"), logLevelChosen: os.Getenv("PERFGATE_LOG_LEVEL") != ""}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" && g.command != "" {
			g.args = append(g.args, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		isFlag := strings.HasPrefix(a, "-") && a != "-" && a != "--"
		switch {
		case isFlag && name == "log-level":
			if !hasValue {
				if i+1 >= len(args) {
					return g, fmt.Errorf("--log-level needs a value: debug, info, warn or error")
				}
				i++
				value = args[i]
			}
			g.logLevel, g.logLevelChosen = value, true
		case g.command != "":
			g.args = append(g.args, a)
		case isFlag && (name == "h" || name == "help"):
			g.help = true
		case isFlag && (name == "version" || name == "v"):
			g.version = true
		case isFlag:
			msg := fmt.Sprintf("unknown global flag %s", a)
			if s := suggest.Closest(name, []string{"log-level", "version", "help"}); s != "" {
				msg += fmt.Sprintf("; did you mean --%s?", s)
			}
			return g, fmt.Errorf("%s (a command's own flags go after the command)", msg)
		default:
			g.command = a
		}
	}
	return g, nil
}

func commandNames() []string {
	names := make([]string, 0, len(commands)+1)
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: perfgate [--log-level LEVEL] COMMAND [flags]\n       perfgate --version\n\ncommands:\n")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, `
global flags (anywhere on the line):
  --log-level LEVEL   debug, info, warn or error (default $PERFGATE_LOG_LEVEL, else info)

Run 'perfgate COMMAND -h' for a command's flags.
`)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
