package engineinfo

import (
	"bufio"
	"bytes"
	"regexp"
	"sort"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// vLLM publishes its configuration as the labels of info series on
// /metrics (vllm:cache_config_info, and in newer releases more
// *_config_info): one series, value 1, a label per setting.
var infoSeries = regexp.MustCompile(`^(vllm:\w+_config_info)\{(.*)\}\s+\S+`)

var labelRe = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// vllmFlag is the command-line flag a label answers to, where its name
// is not the label's.
var vllmFlag = map[string]string{
	"cache_dtype": "--kv-cache-dtype",
}

// ParseVLLMMetrics reads the settings from vLLM's /metrics text.
func ParseVLLMMetrics(b []byte) []result.Setting {
	var out []result.Setting
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m := infoSeries.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var batch []result.Setting
		for _, l := range labelRe.FindAllStringSubmatch(m[2], -1) {
			name, value := l[1], l[2]
			if name == "engine" || name == "model_name" {
				continue
			}
			flag := vllmFlag[name]
			if flag == "" {
				flag = "--" + strings.ReplaceAll(name, "_", "-")
			}
			batch = append(batch, result.Setting{Name: name, Value: value, Source: "/metrics " + m[1],
				Evidence: name + `="` + value + `"`, Knobs: []string{flag, name}})
		}
		sort.Slice(batch, func(i, j int) bool { return batch[i].Name < batch[j].Name })
		out = append(out, batch...)
	}
	return out
}
