package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/suggest"
)

// flagSet is a subcommand's flags. Every subcommand parses through it so
// that all of them behave alike: -h prints the synopsis and every flag on
// stdout and exits 0; a mistyped flag gets one line naming it, the closest
// real flag and how to list them all, and exit 3; flags may follow
// positional arguments.
type flagSet struct {
	*flag.FlagSet
	env      *cliEnv
	synopsis string
	// epilog is printed after the flags (notes, environment variables).
	epilog string
}

// flags starts the flag set of "perfgate NAME". synopsis is what follows
// the name in the usage line, e.g. "--target URL [flags]".
func (env *cliEnv) flags(name, synopsis string) *flagSet {
	f := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), env: env, synopsis: synopsis}
	f.SetOutput(io.Discard)
	f.Usage = func() { f.usage(env.stderr) }
	return f
}

// parse parses args. When ok is false the command must return code: 0
// after -h, 3 after a bad flag.
func (f *flagSet) parse(args []string) (code int, ok bool) {
	usage := f.Usage
	f.Usage = func() {} // flag.Parse calls it on every error; we print our own
	defer func() { f.Usage = usage }()
	var positional []string
	for {
		err := f.FlagSet.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			f.usage(f.env.stdout)
			return 0, false
		}
		if err != nil {
			f.badFlag(err)
			return 3, false
		}
		rest := f.Args()
		consumed := len(args) - len(rest)
		if len(rest) == 0 {
			break
		}
		if consumed > 0 && args[consumed-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Parsing "--" and the positional arguments sets Args without touching
	// any flag.
	if err := f.FlagSet.Parse(append([]string{"--"}, positional...)); err != nil {
		f.badFlag(err)
		return 3, false
	}
	return 0, true
}

// badFlag explains a parse error in one or two lines instead of the whole
// flag list.
func (f *flagSet) badFlag(err error) {
	name := "perfgate " + f.Name()
	msg := err.Error()
	if undef, found := strings.CutPrefix(msg, "flag provided but not defined: "); found {
		undef = strings.TrimLeft(undef, "-")
		fmt.Fprintf(f.env.stderr, "%s: unknown flag --%s", name, undef)
		if s := suggest.Closest(undef, f.names()); s != "" {
			fmt.Fprintf(f.env.stderr, "; did you mean --%s?", s)
		}
		fmt.Fprintln(f.env.stderr)
	} else {
		fmt.Fprintf(f.env.stderr, "%s: %s\n", name, strings.ReplaceAll(msg, "flag -", "flag --"))
	}
	fmt.Fprintf(f.env.stderr, "Run '%s -h' for every flag.\n", name)
}

func (f *flagSet) names() []string {
	var out []string
	f.VisitAll(func(fl *flag.Flag) { out = append(out, fl.Name) })
	return out
}

// usage prints the synopsis and every flag with its default.
func (f *flagSet) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: perfgate %s %s\n", f.Name(), f.synopsis)
	first := true
	f.VisitAll(func(fl *flag.Flag) {
		if first {
			fmt.Fprintf(w, "\nflags:\n")
			first = false
		}
		typ, text := flag.UnquoteUsage(fl)
		line := "  --" + fl.Name
		if typ != "" {
			line += " " + typ
		}
		fmt.Fprintf(w, "%s\n      %s", line, strings.ReplaceAll(text, "\n", "\n      "))
		switch {
		case fl.DefValue == "" || fl.DefValue == "false" || fl.DefValue == "0" || fl.DefValue == "[]":
		case typ == "string":
			fmt.Fprintf(w, " (default %q)", fl.DefValue)
		default:
			fmt.Fprintf(w, " (default %s)", fl.DefValue)
		}
		fmt.Fprintln(w)
	})
	if f.epilog != "" {
		fmt.Fprintf(w, "\n%s", f.epilog)
		if !strings.HasSuffix(f.epilog, "\n") {
			fmt.Fprintln(w)
		}
	}
}
