package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// A `docker build` of a pull request's Dockerfile runs with --network=none,
// but with Docker's classic builder that holds only for RUN: the daemon
// itself fetches `ADD <url>`, pulls a FROM image it does not have and an
// image named by `COPY --from`, from the host's network — the cloud's
// metadata service and every internal HTTP service included. CheckBuild
// reads the Dockerfile before the build and refuses each of those, so
// nothing the build does leaves the host.

// ImageInspector says whether ref is an image the daemon has, and its
// ONBUILD triggers (which run in a build FROM it).
type ImageInspector func(ref string) (exists bool, onbuild []string, err error)

// BuildError is a refusal of a build: what the Dockerfile asks for and why
// it cannot have it.
type BuildError struct {
	File string
	Line int
	Msg  string
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("%s line %d: %s", e.File, e.Line, e.Msg)
}

// CheckBuild checks a `docker build` command line (after the docker
// binary's "build", "image build" or "buildx build") run in dir: the
// build context must be a directory, the Dockerfile one inside dir, and
// the Dockerfile may fetch nothing (see above). inspect answers for the
// images FROM names.
func CheckBuild(args []string, dir string, inspect ImageInspector) error {
	if len(args) == 0 || strings.HasPrefix(args[len(args)-1], "-") {
		return errors.New("server.build: put the build context (a directory of the checkout, such as `.`) last on the `docker build` line")
	}
	ctxDir := args[len(args)-1]
	if ctxDir == "-" || strings.Contains(ctxDir, "://") || strings.HasPrefix(ctxDir, "git@") {
		return fmt.Errorf("server.build: the build context %q is not a directory of the checkout: perfgate builds only what the commit holds", ctxDir)
	}
	file := ""
	buildArgs := map[string]string{}
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
				buildArgs[k] = v
			}
		} else if flagIs(a, "--ssh") || flagIs(a, "--secret") {
			return fmt.Errorf("server.build hands the build a credential of the runner (%q): a pull request's Dockerfile would read it", a)
		} else if flagIs(a, "--platform") {
			return fmt.Errorf("server.build asks for a platform (%q): the daemon may pull another variant of a base image; build for the runner's own", a)
		} else if a == "--allow" || strings.HasPrefix(a, "--allow=") {
			return fmt.Errorf("server.build grants the build an entitlement (%q): a pull request's Dockerfile would get it", a)
		} else if a == "--pull" || (strings.HasPrefix(a, "--pull=") && a != "--pull=false") {
			return fmt.Errorf("server.build asks the daemon to pull images (%q): perfgate builds from local images only, with no network", a)
		}
	}
	if file == "-" {
		return errors.New("server.build reads the Dockerfile from stdin: name a file of the checkout")
	}
	if file == "" {
		file = filepath.Join(ctxDir, "Dockerfile")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open checkout: %w", err)
	}
	defer root.Close()
	rel := file
	if filepath.IsAbs(rel) {
		if rel, err = filepath.Rel(dir, file); err != nil {
			return fmt.Errorf("server.build: Dockerfile %s is outside the checkout", file)
		}
	}
	f, err := root.Open(filepath.Clean(rel))
	if err != nil {
		return fmt.Errorf("server.build: read the Dockerfile %s inside the checkout: %w", file, err)
	}
	defer f.Close()
	return CheckDockerfile(file, io.LimitReader(f, 1<<20), buildArgs, inspect)
}

// CheckDockerfile refuses a Dockerfile that would make the daemon fetch
// anything: ADD of a URL (or of a source built from a variable, which may
// expand to one), FROM or COPY --from of an image the daemon does not
// have, ONBUILD triggers that do either.
func CheckDockerfile(name string, r io.Reader, buildArgs map[string]string, inspect ImageInspector) error {
	instrs, err := parseDockerfile(r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	stages := map[string]bool{}
	args := map[string]string{} // ARGs before the first FROM
	seenFrom := false
	for _, in := range instrs {
		bad := func(format string, a ...any) error {
			return &BuildError{File: name, Line: in.line, Msg: fmt.Sprintf(format, a...)}
		}
		switch in.cmd {
		case "ARG":
			if !seenFrom {
				for _, f := range in.fields {
					k, v, _ := strings.Cut(f, "=")
					if b, ok := buildArgs[k]; ok {
						v = b
					}
					args[k] = v
				}
			}
		case "FROM":
			seenFrom = true
			if len(in.fields) > 0 && strings.HasPrefix(in.fields[0], "--platform") {
				return bad("FROM %s: the daemon may pull another platform's variant of the image; build for the runner's own", in.fields[0])
			}
			fields := withoutFlags(in.fields)
			if len(fields) == 0 {
				return bad("FROM names no image")
			}
			if err := checkFrom(name, in.line, fields[0], args, stages, inspect); err != nil {
				return err
			}
			if len(fields) >= 3 && strings.EqualFold(fields[1], "AS") {
				stages[strings.ToLower(fields[2])] = true
			}
		case "ONBUILD":
			ts, err := parseDockerfile(strings.NewReader(in.rest))
			if err != nil || len(ts) != 1 {
				return bad("ONBUILD %q cannot be checked", in.rest)
			}
			if msg := fetches(ts[0], stages); msg != "" {
				return bad("ONBUILD: %s", msg)
			}
		default:
			if msg := fetches(in, stages); msg != "" {
				return bad("%s", msg)
			}
		}
	}
	return nil
}

// checkFrom refuses a FROM image the daemon would have to pull, or one
// whose ONBUILD triggers fetch.
func checkFrom(name string, line int, image string, args map[string]string, stages map[string]bool, inspect ImageInspector) error {
	bad := func(format string, a ...any) error {
		return &BuildError{File: name, Line: line, Msg: fmt.Sprintf(format, a...)}
	}
	ref, ok := expand(image, args)
	if !ok {
		return bad("FROM %s: the image is a variable perfgate cannot resolve; give it with --build-arg or an ARG default", image)
	}
	if ref == "scratch" || stages[strings.ToLower(ref)] {
		return nil
	}
	exists, onbuild, err := inspect(ref)
	if err != nil {
		return fmt.Errorf("%s line %d: inspect %s: %w", name, line, ref, err)
	}
	if !exists {
		return bad("FROM %s: the image is not on this runner, and the build has no network to pull it; load or build it on the runner first (docker load, docker build), or name it by a local image ID", ref)
	}
	for _, t := range onbuild {
		ts, err := parseDockerfile(strings.NewReader(t))
		if err != nil || len(ts) != 1 {
			return bad("FROM %s: its ONBUILD trigger %q cannot be checked", ref, t)
		}
		if msg := fetches(ts[0], stages); msg != "" {
			return bad("FROM %s: its ONBUILD trigger %s", ref, msg)
		}
	}
	return nil
}

// fetches says what in would make the daemon fetch, or "".
func fetches(in instruction, stages map[string]bool) string {
	if in.cmd == "RUN" {
		for _, f := range in.fields {
			if !strings.HasPrefix(f, "--") {
				break
			}
			if v, ok := strings.CutPrefix(f, "--network="); ok && v != "none" {
				return fmt.Sprintf("RUN %s asks for a network, and a build on perfgate's runners has none", f)
			}
		}
		return ""
	}
	if in.cmd != "ADD" && in.cmd != "COPY" {
		return ""
	}
	var srcs []string
	for _, f := range in.fields {
		if from, ok := strings.CutPrefix(f, "--from="); ok {
			if isStageIndex(from) || stages[strings.ToLower(from)] {
				continue
			}
			return fmt.Sprintf("%s --from=%s names an image, which the daemon would pull from a registry; copy from an earlier stage (FROM <local image> AS name) instead", in.cmd, from)
		}
		if !strings.HasPrefix(f, "--") {
			srcs = append(srcs, f)
		}
	}
	if in.json != nil {
		srcs = in.json
	}
	if len(srcs) > 0 {
		srcs = srcs[:len(srcs)-1] // the destination
	}
	if in.cmd != "ADD" {
		return ""
	}
	for _, s := range srcs {
		switch {
		case strings.Contains(s, "://") || strings.HasPrefix(s, "git@"):
			return fmt.Sprintf("ADD %s fetches a URL, and a build on perfgate's runners reaches no network: put the file in the repository and COPY it", s)
		case strings.Contains(s, "$"):
			return fmt.Sprintf("ADD %s: a source built from a variable may name a URL; name a file of the repository", s)
		case strings.ContainsAny(s, "\\`'\""):
			// The builder unquotes and unescapes a source (http:\/\/… is a
			// URL to it): only plain names are checked, so only they pass.
			return fmt.Sprintf("ADD %s: a source with quotes or escapes may name a URL; name a file of the repository plainly", s)
		}
	}
	return ""
}

func flagIs(a, name string) bool { return a == name || strings.HasPrefix(a, name+"=") }

var stageIndex = regexp.MustCompile(`^[0-9]+$`)

func isStageIndex(s string) bool { return stageIndex.MatchString(s) }

// withoutFlags drops FROM's --platform and the like.
func withoutFlags(fields []string) []string {
	var out []string
	for _, f := range fields {
		if !strings.HasPrefix(f, "--") {
			out = append(out, f)
		}
	}
	return out
}

var varRef = regexp.MustCompile(`\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)`)

// expand resolves $NAME and ${NAME} from args; ok is false when a name has
// no value (or uses a modifier such as ${NAME:-x}).
func expand(s string, args map[string]string) (string, bool) {
	ok := true
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		k := strings.Trim(m[1:], "{}")
		v, found := args[k]
		if !found || v == "" {
			ok = false
		}
		return v
	})
	if strings.Contains(out, "$") {
		return out, false
	}
	return out, ok
}

// instruction is one logical line of a Dockerfile.
type instruction struct {
	line   int
	cmd    string   // upper case
	rest   string   // after the keyword
	fields []string // rest split on white space
	json   []string // rest as a JSON array, when it is one
}

var (
	escapeDirective = regexp.MustCompile(`(?i)^#\s*escape\s*=\s*(.)\s*$`)
	syntaxDirective = regexp.MustCompile(`(?i)^#\s*syntax\s*=`)
	whitespace      = regexp.MustCompile(`[\t\v\f\r ]+`)
)

// parseDockerfile splits a Dockerfile into instructions as Docker reads
// them: parser directives, comments, line continuations.
func parseDockerfile(r io.Reader) ([]instruction, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	escape := byte('\\')
	directives := true
	var (
		out   []instruction
		cur   strings.Builder
		start int
		n     int
	)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if directives {
			if m := escapeDirective.FindStringSubmatch(trimmed); m != nil {
				escape = m[1][0]
				continue
			}
			if syntaxDirective.MatchString(trimmed) {
				return nil, fmt.Errorf("line %d: %s: a syntax directive makes BuildKit pull its frontend image, and a build on perfgate's runners has no network; remove it", n, trimmed)
			}
			if !strings.HasPrefix(trimmed, "#") || trimmed == "" {
				directives = false
			}
		}
		// Comments and empty lines are skipped, inside a continuation too
		// (Docker joins the lines around them).
		if strings.HasPrefix(trimmed, "#") || trimmed == "" {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(trimmed, string(escape)) {
			cur.WriteString(strings.TrimSuffix(trimmed, string(escape)))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(trimmed)
		out = append(out, newInstruction(start, cur.String()))
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur.Len() > 0 {
		out = append(out, newInstruction(start, cur.String()))
	}
	return out, nil
}

func newInstruction(line int, s string) instruction {
	// Docker splits the keyword off at any white space, tabs included.
	parts := whitespace.Split(strings.TrimSpace(s), 2)
	kw, rest := parts[0], ""
	if len(parts) == 2 {
		rest = strings.TrimSpace(parts[1])
	}
	in := instruction{line: line, cmd: strings.ToUpper(kw), rest: rest, fields: strings.Fields(rest)}
	// Flags come before a JSON array: ADD --chown=x ["a", "b"].
	j := rest
	for strings.HasPrefix(j, "--") {
		p := whitespace.Split(j, 2)
		if len(p) < 2 {
			break
		}
		j = strings.TrimSpace(p[1])
	}
	var arr []string
	if strings.HasPrefix(j, "[") && json.Unmarshal([]byte(j), &arr) == nil {
		in.json = arr
	}
	return in
}
