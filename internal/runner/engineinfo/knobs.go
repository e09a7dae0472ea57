package engineinfo

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Bounds of the walk: configuration lives in small text files, and a
// large tree (an engine's source) must not cost the job seconds.
const (
	maxKnobFile  = 256 << 10
	maxKnobFiles = 20000
	maxChanges   = 50 // GitHub takes 50 annotations a request
)

// KnobChanges lists the lines the head's tree adds against the base's
// that name one of knobs as a word, outside comments and documentation (`OLLAMA_KV_CACHE_TYPE=q8_0`,
// `PARAMETER num_ctx 2048`, `--max-model-len 8192`): the settings the
// change meant to make. A line is "added" when the same file in the base
// does not hold it; a file the base lacks adds all its lines.
func KnobChanges(baseDir, headDir string, knobs []string) []result.KnobChange {
	if baseDir == "" || headDir == "" || len(knobs) == 0 {
		return nil
	}
	res := make([]*regexp.Regexp, len(knobs))
	for i, k := range knobs {
		res[i] = regexp.MustCompile(`(^|[^\w-])` + regexp.QuoteMeta(k) + `($|[^\w-])`)
	}
	// The trees are a pull request's: every read goes through an os.Root,
	// so a symlink cannot lead the agent out of the checkout.
	headRoot, err := os.OpenRoot(headDir)
	if err != nil {
		return nil
	}
	defer headRoot.Close()
	baseRoot, err := os.OpenRoot(baseDir)
	if err != nil {
		return nil
	}
	defer baseRoot.Close()
	var out []result.KnobChange
	files := 0
	_ = filepath.WalkDir(headDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || len(out) >= maxChanges {
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if files++; files > maxKnobFiles || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > maxKnobFile {
			return nil
		}
		rel, err := filepath.Rel(headDir, path)
		if err != nil || prose(rel) {
			return nil
		}
		head, err := headRoot.ReadFile(rel)
		if err != nil || bytes.IndexByte(head, 0) >= 0 {
			return nil
		}
		base, _ := baseRoot.ReadFile(rel)
		if bytes.Equal(head, base) {
			return nil
		}
		had := map[string]bool{}
		for _, l := range lines(base) {
			had[string(bytes.TrimSpace(l))] = true
		}
		for n, l := range lines(head) {
			t := bytes.TrimSpace(l)
			if len(t) == 0 || had[string(t)] || comment(t) {
				continue
			}
			for i, re := range res {
				if re.Match(t) {
					out = append(out, result.KnobChange{Knob: knobs[i], File: filepath.ToSlash(rel), Line: n + 1, Text: string(t)})
				}
			}
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Line < out[j].Line
	})
	if len(out) > maxChanges {
		out = out[:maxChanges]
	}
	return out
}

// prose says whether a file is documentation: a README that names a knob
// sets nothing.
func prose(rel string) bool {
	base := strings.ToUpper(filepath.Base(rel))
	switch strings.ToLower(filepath.Ext(rel)) {
	case ".md", ".rst", ".txt", ".adoc", ".html":
		return true
	}
	for _, p := range []string{"README", "CHANGELOG", "LICENSE", "NOTICE", "AUTHORS"} {
		if strings.HasPrefix(base, p) {
			return true
		}
	}
	return false
}

// comment says whether a line is a comment in the usual configuration
// syntaxes (shell, env, YAML, TOML, Modelfile, Python; C-like).
func comment(t []byte) bool {
	return bytes.HasPrefix(t, []byte("#")) || bytes.HasPrefix(t, []byte("//")) || bytes.HasPrefix(t, []byte(";"))
}

func lines(b []byte) [][]byte {
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxKnobFile)
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	return out
}
