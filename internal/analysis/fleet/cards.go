package fleet

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Card is one GPU a runner reports when it registers.
type Card struct {
	UUID string `json:"uuid"`
	// Model is the name NVML gives, e.g. "NVIDIA H100 80GB HBM3".
	Model string `json:"model,omitempty"`
	// MemoryMiB is the card's total memory.
	MemoryMiB int    `json:"memory_mib,omitempty"`
	Driver    string `json:"driver,omitempty"` // "550.54.15"
}

// CardLabels are the labels a runner's cards give it, on top of the ones
// it is started with: "gpu" for any card, the model family ("h100"), the
// full model ("nvidia-h100-80gb-hbm3"), the memory rounded to GiB
// ("mem-80gb") and the driver's major and full version ("driver-550",
// "driver-550.54.15"). A runner with several cards carries only the
// labels every one of them has, so a job asking for "h100" never lands on
// the a100 beside it. A repository asks for them in runner.labels.
func CardLabels(cards []Card) []string {
	var common []string
	for i, c := range cards {
		l := c.labels()
		if i == 0 {
			common = l
			continue
		}
		common = slices.DeleteFunc(common, func(s string) bool { return !slices.Contains(l, s) })
	}
	slices.Sort(common)
	return common
}

func (c Card) labels() []string {
	out := []string{"gpu"}
	if slug := modelSlug(c.Model); slug != "" {
		out = append(out, "nvidia-"+slug)
		if fam := family(slug); fam != "" {
			out = append(out, fam)
		}
	}
	if c.MemoryMiB > 0 {
		out = append(out, fmt.Sprintf("mem-%dgb", int(math.Round(float64(c.MemoryMiB)/1024))))
	}
	if d := strings.TrimSpace(c.Driver); d != "" {
		major, _, _ := strings.Cut(d, ".")
		out = append(out, "driver-"+major)
		if major != d {
			out = append(out, "driver-"+d)
		}
	}
	return out
}

// modelSlug is the model name in lower case, words joined by "-", without
// the vendor: "NVIDIA H100 80GB HBM3" → "h100-80gb-hbm3".
func modelSlug(model string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(model) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		default:
			dash = true
		}
	}
	return strings.TrimPrefix(b.String(), "nvidia-")
}

// family is the first word of the slug with a digit in it ("h100",
// "a100", "l40s"), with the word before it when it is all digits
// ("geforce-rtx-4090" → "rtx-4090").
func family(slug string) string {
	words := strings.Split(slug, "-")
	for i, w := range words {
		if !strings.ContainsAny(w, "0123456789") {
			continue
		}
		if strings.Trim(w, "0123456789") == "" && i > 0 {
			return words[i-1] + "-" + w
		}
		return w
	}
	return ""
}
