package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// A pull request's Dockerfile is built in the runner's sealed builder
// (Builder), which has no route anywhere: that is what keeps a build off
// the network, whatever the Dockerfile's bytes. Nothing here decides
// whether a build may run. This file reads the `docker build` line (which
// is the runner's, from the trusted config) and, with BuildKit's own
// parser, the Dockerfile: to name the base images to copy into the
// builder, and to explain a failed build by quoting the lines that asked
// for a network, a credential or an image the runner lacks.

// BuildSpec is what a `docker build` line names.
type BuildSpec struct {
	Context    string            // the build context, a directory of the checkout
	Dockerfile string            // the Dockerfile, relative to the checkout
	BuildArgs  map[string]string // --build-arg values
}

// CheckBuild reads a `docker build` command line (after the docker
// binary's "build", "image build" or "buildx build") run in dir. It refuses
// a context that is not a directory of the checkout, a Dockerfile outside
// the checkout or from stdin, and flags that hand the build a credential
// or an entitlement of the runner: those are the runner's to give, and
// no network namespace takes them back.
func CheckBuild(args []string, dir string) (BuildSpec, error) {
	spec := BuildSpec{BuildArgs: map[string]string{}}
	if len(args) == 0 || strings.HasPrefix(args[len(args)-1], "-") {
		return spec, errors.New("server.build: put the build context (a directory of the checkout, such as `.`) last on the `docker build` line")
	}
	spec.Context = args[len(args)-1]
	if spec.Context == "-" || strings.Contains(spec.Context, "://") || strings.HasPrefix(spec.Context, "git@") {
		return spec, fmt.Errorf("server.build: the build context %q is not a directory of the checkout: perfgate builds only what the commit holds", spec.Context)
	}
	file := ""
	for i := 0; i < len(args)-1; i++ {
		a := args[i]
		val := func(name string) (string, bool) {
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v, true
			}
			if a == name && i+1 < len(args)-1 {
				i++
				return args[i], true
			}
			return "", false
		}
		if v, ok := val("--file"); ok {
			file = v
		} else if v, ok := val("-f"); ok {
			file = v
		} else if v, ok := val("--build-arg"); ok {
			if k, v, ok := strings.Cut(v, "="); ok {
				spec.BuildArgs[k] = v
			}
		} else if flagIs(a, "--ssh") || flagIs(a, "--secret") {
			return spec, fmt.Errorf("server.build hands the build a credential of the runner (%q): a pull request's Dockerfile would read it", a)
		} else if flagIs(a, "--allow") {
			return spec, fmt.Errorf("server.build grants the build an entitlement (%q): a pull request's Dockerfile would get it", a)
		}
	}
	if file == "-" {
		return spec, errors.New("server.build reads the Dockerfile from stdin: name a file of the checkout")
	}
	if file == "" {
		file = filepath.Join(spec.Context, "Dockerfile")
	}
	rel := file
	if filepath.IsAbs(rel) {
		r, err := filepath.Rel(dir, file)
		if err != nil || !filepath.IsLocal(r) {
			return spec, fmt.Errorf("server.build: -f %s: the Dockerfile is outside the checkout; name a file of the commit", file)
		}
		rel = r
	}
	if !filepath.IsLocal(rel) {
		return spec, fmt.Errorf("server.build: -f %s: the Dockerfile is outside the checkout; name a file of the commit", file)
	}
	spec.Dockerfile = filepath.Clean(rel)
	// Open it through the checkout's root: a symlink out of the checkout
	// is refused here, before the docker CLI would follow it.
	if _, err := ReadDockerfile(dir, spec.Dockerfile); err != nil {
		return spec, err
	}
	return spec, nil
}

// MaxDockerfile bounds what ReadDockerfile reads: more than any real
// Dockerfile, and no bound of the builder's (which reads it whole): a
// larger file is still built, only not explained.
const MaxDockerfile = 64 << 20

// ReadDockerfile reads rel inside dir, refusing a path or symlink that
// leaves it.
func ReadDockerfile(dir, rel string) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open checkout: %w", err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("server.build: read the Dockerfile %s inside the checkout: %w", rel, err)
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(&limited{f, MaxDockerfile}); err != nil {
		return nil, fmt.Errorf("server.build: read the Dockerfile %s: %w", rel, err)
	}
	return b.Bytes(), nil
}

type limited struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("larger than %d bytes", int64(MaxDockerfile))
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// Finding is a line of a Dockerfile that asks the builder for something a
// build on perfgate's runners cannot have.
type Finding struct {
	File string
	Line int
	Text string // the line as written (continuations joined)
	Msg  string
}

func (f Finding) String() string {
	return fmt.Sprintf("%s line %d: `%s`: %s", f.File, f.Line, f.Text, f.Msg)
}

// ImageChecker says whether the runner has an image.
type ImageChecker func(ref string) bool

// Images names the images a Dockerfile builds from (FROM, COPY --from,
// RUN --mount from=) that are not its own stages, with build args and ARG
// defaults expanded: the ones to copy into the builder.
func Images(dockerfile []byte, buildArgs map[string]string) []string {
	var out []string
	seen := map[string]bool{}
	walk(dockerfile, buildArgs, func(ev event) {
		if ev.image != "" && !seen[ev.image] {
			seen[ev.image] = true
			out = append(out, ev.image)
		}
	})
	return out
}

// Explain reads a Dockerfile as BuildKit does and names each line that
// asks for a network, a credential or an image the runner lacks (local
// answers for the images), in file order. It never decides whether a
// build runs: the sealed builder does.
func Explain(name string, dockerfile []byte, buildArgs map[string]string, local ImageChecker) []Finding {
	var out []Finding
	walk(dockerfile, buildArgs, func(ev event) {
		msg := ev.msg
		if ev.image != "" && msg == "" && !local(ev.image) {
			msg = fmt.Sprintf("the image %s is not on this runner, and perfgate's builder reaches no registry: load or build it on the runner first (docker load, docker build)", ev.image)
		}
		if msg != "" {
			out = append(out, Finding{File: name, Line: ev.line, Text: quoteLine(ev.text), Msg: msg})
		}
	})
	return out
}

// event is one thing walk saw: an image the build uses, or a reason the
// builder cannot do what a line asks.
type event struct {
	line  int
	text  string
	image string
	msg   string
}

// walk parses a Dockerfile with BuildKit's parser and reports its images
// and its lines that reach out.
func walk(dockerfile []byte, buildArgs map[string]string, emit func(event)) {
	if syntax, _, rng, ok := parser.DetectSyntax(dockerfile); ok {
		line := 1
		if len(rng) > 0 {
			line = rng[0].Start.Line
		}
		emit(event{line: line, text: "# syntax=" + syntax, msg: "a syntax directive asks BuildKit for a frontend image from a registry, which perfgate's builder cannot reach (its classic builder reads the line as a comment); remove it"})
	}
	res, err := parser.Parse(bytes.NewReader(dockerfile))
	if err != nil {
		line := 0
		var loc *parser.LocationError
		if errors.As(err, &loc) && len(loc.Locations) > 0 && len(loc.Locations[0]) > 0 {
			line = loc.Locations[0][0].Start.Line
		}
		emit(event{line: line, text: "", msg: fmt.Sprintf("the Dockerfile does not parse: %v", err)})
		return
	}
	lex := shell.NewLex(res.EscapeToken)
	args := map[string]string{} // ARGs before the first FROM, for FROM lines
	stages := map[string]bool{}
	n := 0
	expand := func(s string) (string, bool) {
		v, _, err := lex.ProcessWord(s, envOf(args))
		return v, err == nil && !strings.Contains(v, "$") && v != ""
	}
	for _, node := range res.AST.Children {
		checkNode(node, node, expand, stages, &n, args, buildArgs, emit)
	}
}

// checkNode reports one instruction; at is where it stands in the file
// (the ONBUILD line that holds it, or itself).
func checkNode(node, at0 *parser.Node, expand func(string) (string, bool), stages map[string]bool, n *int, args, buildArgs map[string]string, emit func(event)) {
	onbuild := node != at0
	at := func(msg string) event {
		return event{line: at0.StartLine, text: at0.Original, msg: msg}
	}
	if len(node.Heredocs) > 0 {
		emit(at("a heredoc: perfgate builds with Docker's classic builder, which reads no heredocs (the lines inside are instructions to it); put the text in a file of the repository and COPY it"))
	}
	switch kw := strings.ToLower(node.Value); kw {
	case "arg":
		if *n > 0 || onbuild {
			return
		}
		for a := node.Next; a != nil; a = a.Next {
			k, v, _ := strings.Cut(a.Value, "=")
			if b, ok := buildArgs[k]; ok {
				v = b
			}
			args[k] = v
		}
	case "from":
		*n++
		if node.Next == nil {
			return
		}
		base := node.Next.Value
		if node.Next.Next != nil && strings.EqualFold(node.Next.Next.Value, "as") && node.Next.Next.Next != nil {
			defer func() { stages[strings.ToLower(node.Next.Next.Next.Value)] = true }()
		}
		ref, ok := expand(base)
		switch {
		case !ok:
			emit(at(fmt.Sprintf("FROM %s: perfgate cannot resolve the image's name; give it with --build-arg or an ARG default", base)))
		case ref == "scratch" || stages[strings.ToLower(ref)]:
		default:
			ev := at("")
			ev.image = ref
			emit(ev)
		}
	case "onbuild":
		if node.Next != nil && len(node.Next.Children) > 0 {
			checkNode(node.Next.Children[0], node, expand, stages, n, args, buildArgs, emit)
		}
	case "add", "copy":
		for _, f := range node.Flags {
			from, ok := strings.CutPrefix(f, "--from=")
			if !ok || stageIndex.MatchString(from) || stages[strings.ToLower(from)] {
				continue
			}
			ev := at("")
			ev.image = from
			if ref, ok := expand(from); ok {
				ev.image = ref
			}
			emit(ev)
		}
		if kw != "add" {
			return
		}
		var srcs []string
		for a := node.Next; a != nil; a = a.Next {
			srcs = append(srcs, a.Value)
		}
		if len(srcs) > 0 {
			srcs = srcs[:len(srcs)-1] // the destination
		}
		for _, s := range srcs {
			if why := remote(s); why != "" {
				emit(at(fmt.Sprintf("ADD %s %s, and perfgate's builder reaches no network: put the file in the repository and COPY it", s, why)))
				return
			}
		}
	case "run":
		checkRun(node, at, emit)
	}
}

// checkRun reports a RUN that asks for what perfgate's builder does not
// give: a credential, a network, or BuildKit's mounts.
func checkRun(node *parser.Node, at func(string) event, emit func(event)) {
	cmd, err := instructions.ParseInstruction(node)
	if err != nil {
		emit(at(fmt.Sprintf("%v", err)))
		return
	}
	run, ok := cmd.(*instructions.RunCommand)
	if !ok {
		return
	}
	// The mounts are read when the command is expanded; the words
	// stay as written.
	if err := run.Expand(func(w string) (string, error) { return w, nil }); err != nil {
		emit(at(fmt.Sprintf("%v", err)))
		return
	}
	for _, m := range instructions.GetMounts(run) {
		switch m.Type {
		case instructions.MountTypeSecret, instructions.MountTypeSSH:
			emit(at(fmt.Sprintf("RUN --mount=type=%s asks for a credential of the runner, and a build on perfgate's runners gets none; build without it", m.Type)))
			return
		}
	}
	if nw := instructions.GetNetwork(run); nw != instructions.NetworkDefault && nw != instructions.NetworkNone {
		emit(at(fmt.Sprintf("RUN --network=%s asks for a network, and perfgate's builder has none", nw)))
		return
	}
	for _, f := range node.Flags {
		if strings.HasPrefix(f, "--mount") {
			emit(at("RUN --mount needs BuildKit, and perfgate builds with Docker's classic builder; copy what the step needs into the image instead"))
			return
		}
	}
}

// remote says why an ADD source may be fetched from a network, or "".
func remote(s string) string {
	switch {
	case strings.Contains(s, "://") || strings.HasPrefix(s, "git@"):
		return "fetches a URL"
	case strings.Contains(s, "$"):
		return "is built from a variable, which may name a URL"
	case strings.ContainsAny(s, "\\`'\""):
		return "has quotes or escapes, which the builder may read as a URL"
	}
	return ""
}

// quoteLine is a line fit for a message: the first 200 bytes of its first
// physical line.
func quoteLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

type envMap map[string]string

func (e envMap) Get(k string) (string, bool) { v, ok := e[k]; return v, ok }
func (e envMap) Keys() []string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	return keys
}

func envOf(m map[string]string) shell.EnvGetter { return envMap(m) }

func flagIs(a, name string) bool { return a == name || strings.HasPrefix(a, name+"=") }

var stageIndex = regexp.MustCompile(`^[0-9]+$`)
