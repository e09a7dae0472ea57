// Package sandbox contains the code a pull request brings to a GPU host.
// An engine runs in a Docker container that can reach nothing — not the
// agent API, not the host, not the internet — and is reached only through
// a relay that forwards one published loopback port to it (Net); the
// container has a read-only root with tmpfs scratch, a non-root user, no
// capabilities, no-new-privileges, pids and memory limits, only the job's
// GPU and no Docker socket (Policy.RunArgv). Any engine's environment is
// built from an allow-list and never holds a PERFGATE_* variable or the
// agent's token (Env).
//
// Why a relay: Docker cannot publish a port of a container whose only
// network is --internal, and on an --internal bridge the host keeps an
// address the container can reach (every service listening on the host's
// 0.0.0.0, the agent API included). So the engine's network is internal
// and its bridge has no host address at all (inhibit_ipv4); the relay is a
// second, trusted container on that network and on Docker's default
// bridge, where its port is published on 127.0.0.1.
package sandbox

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Fixed paths inside an engine container.
const (
	// Workspace is where the commit's checkout is mounted, read-only.
	Workspace = "/workspace"
	// Models is where the runner's model directory is mounted, read-only.
	Models = "/models"
	// Scratch is the writable tmpfs; HOME points at it.
	Scratch = "/tmp"
)

// Label marks every container and network perfgate makes for a job, with
// the job's id as the value; AgentLabel names the agent that made it, so
// a restarted agent removes its own leftovers and not those of another
// agent on the same host.
const (
	Label      = "perfgate.job"
	AgentLabel = "perfgate.agent"
)

// Policy is how an engine container is contained. Zero fields take the
// defaults below.
type Policy struct {
	User      string // uid:gid; DefaultUser
	PidsLimit int    // processes and threads; DefaultPidsLimit
	Memory    string // memory and memory+swap limit (docker units); DefaultMemory()
	ShmSize   string // /dev/shm; DefaultShmSize (engines share tensors through it)
	Scratch   string // size of the /tmp tmpfs; DefaultScratch
	// CPUs bounds the engine's CPU time (docker --cpus); DefaultCPUs().
	// CPUSets pins the engine of a card to host CPUs (--cpuset-cpus), by
	// the card's UUID: the cores near the card, and apart from the bench
	// client's and the other cards' engines.
	CPUs    string
	CPUSets map[string]string
	// NoFile and NProc are the engine's open-file and process ulimits
	// (soft = hard); DefaultNoFile, DefaultNProc. Core dumps are off.
	NoFile, NProc int
	// LogMaxSize and LogMaxFiles cap what Docker keeps of the engine's
	// output (json-file driver); DefaultLogMaxSize, DefaultLogMaxFiles.
	LogMaxSize  string
	LogMaxFiles int
	// Host is what the limits are fitted to (Fit); CurrentHost() when
	// nil. Tests pin it to make a run line independent of the machine.
	Host *Host
}

// Policy defaults, each lowered to what the host can grant (Fit).
const (
	DefaultUser      = "65534:65534" // nobody
	DefaultPidsLimit = 16384         // vLLM's workers and their threads count too
	DefaultShmSize   = "16g"
	DefaultScratch   = "16g"
	// DefaultNoFile is the engine's open-file limit, lowered to the
	// host's and the Docker daemon's hard limit where that is smaller (a
	// container cannot be given more: runc refuses to start it).
	DefaultNoFile = 65536
	// DefaultNProc counts every process of the engine's uid on the host
	// (all engine containers share it), so it sits above two pids limits;
	// --pids-limit is the per-container bound.
	DefaultNProc       = 4 * DefaultPidsLimit
	DefaultLogMaxSize  = "10m"
	DefaultLogMaxFiles = 2
)

// DefaultCPUs leaves two of the host's CPUs to the agent and the bench
// client, which run beside the engine and are part of the measurement.
func DefaultCPUs() string {
	return strconv.Itoa(max(1, CurrentHost().CPUs-2))
}

// WithDefaults fills the zero fields and lowers every limit to what the
// host grants (Fit with p.Host, or this host's limits).
func (p Policy) WithDefaults() Policy {
	h := p.Host
	if h == nil {
		c := CurrentHost()
		h = &c
	}
	p, _ = p.Fit(*h)
	return p
}

// Fit fills p's zero fields with the defaults and lowers every limit to
// what h can grant: the ulimits to the lowest hard limit of the host, the
// Docker daemon and containerd; the CPUs to the host's; the memory to
// the host's; /dev/shm and the scratch tmpfs to the memory limit (their
// pages count against it). Lowered is one line per limit asked for above
// what h grants (a default lowered is not listed).
func (p Policy) Fit(h Host) (fitted Policy, lowered []string) {
	if p.User == "" {
		p.User = DefaultUser
	}
	if p.PidsLimit <= 0 {
		p.PidsLimit = DefaultPidsLimit
	}
	asked := p.NoFile > 0
	if !asked {
		p.NoFile = DefaultNoFile
	}
	if h.NoFile > 0 && uint64(p.NoFile) > h.NoFile {
		if asked {
			lowered = append(lowered, fmt.Sprintf("open files %d lowered to %d, the lowest hard limit of %s", p.NoFile, h.NoFile, h.From))
		}
		p.NoFile = int(h.NoFile)
	}
	asked = p.NProc > 0
	if !asked {
		p.NProc = DefaultNProc
	}
	if h.NProc > 0 && uint64(p.NProc) > h.NProc {
		if asked {
			lowered = append(lowered, fmt.Sprintf("processes %d lowered to %d, the lowest hard limit of %s", p.NProc, h.NProc, h.From))
		}
		p.NProc = int(h.NProc)
	}
	if p.CPUs == "" {
		p.CPUs = strconv.Itoa(max(1, h.CPUs-2))
	} else if v, err := strconv.ParseFloat(p.CPUs, 64); err == nil && h.CPUs > 0 && v > float64(h.CPUs) {
		lowered = append(lowered, fmt.Sprintf("CPUs %s lowered to %d, the host's", p.CPUs, h.CPUs))
		p.CPUs = strconv.Itoa(h.CPUs)
	}
	mem := h.MemoryBytes * 3 / 4
	if p.Memory == "" {
		p.Memory = "32g"
		if mem > 0 {
			p.Memory = strconv.FormatInt(mem>>20, 10) + "m"
		}
	} else if v, err := ParseDockerBytes(p.Memory); err == nil && h.MemoryBytes > 0 && v > h.MemoryBytes {
		lowered = append(lowered, fmt.Sprintf("memory %s lowered to %dm, the host's", p.Memory, h.MemoryBytes>>20))
		p.Memory = strconv.FormatInt(h.MemoryBytes>>20, 10) + "m"
	}
	limit, _ := ParseDockerBytes(p.Memory)
	for _, t := range []struct {
		name string
		v    *string
		def  string
	}{{"/dev/shm", &p.ShmSize, DefaultShmSize}, {"scratch", &p.Scratch, DefaultScratch}} {
		asked := *t.v != ""
		if !asked {
			*t.v = t.def
		}
		if v, err := ParseDockerBytes(*t.v); err == nil && limit > 0 && v > limit {
			if asked {
				lowered = append(lowered, fmt.Sprintf("%s %s lowered to the memory limit %s", t.name, *t.v, p.Memory))
			}
			*t.v = p.Memory
		}
	}
	if p.LogMaxSize == "" {
		p.LogMaxSize = DefaultLogMaxSize
	}
	if p.LogMaxFiles <= 0 {
		p.LogMaxFiles = DefaultLogMaxFiles
	}
	return p, lowered
}

// ParseCPUSets reads UUID=CPUS,UUID=CPUS (the agent's --engine-cpuset);
// CPUS is a cpuset list such as 0-15 or 0-7:16-23 (":" stands for ","
// inside one card's list, as the flag itself is comma-separated).
func ParseCPUSets(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		v = strings.ReplaceAll(strings.TrimSpace(v), ":", ",")
		if !ok || strings.TrimSpace(k) == "" || !cpusetList.MatchString(v) {
			return nil, fmt.Errorf("engine cpuset %q: want GPU-UUID=CPUS, e.g. GPU-1a2b…=0-15", kv)
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

var cpusetList = regexp.MustCompile(`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`)

// DefaultMemory is three quarters of the host's memory, so a runaway
// engine is killed before the agent and the host are.
func DefaultMemory() string {
	return Policy{}.WithDefaults().Memory
}

// Mount is a bind mount into the container: read-only unless Writable
// (only a profiling pass's fresh trace directory is).
type Mount struct {
	Source, Target string
	Writable       bool
}

// Container is an engine container.
type Container struct {
	Name    string // docker --name
	Job     string // the Label value
	Agent   string // the AgentLabel value
	Network string // the job's sandbox network (Net.Name)
	Image   string
	Args    []string // after the image
	Env     map[string]string
	Mounts  []Mount
	Workdir string // working directory inside; the image's when ""
	// GPU is the card's UUID; "" runs without --gpus (hosts without the
	// NVIDIA runtime: tests).
	GPU string
	// Card is the card the engine measures on, for its CPU pinning
	// (Policy.CPUSets), set even when GPU is not.
	Card string
}

// RunArgv is the `docker run` arguments (after the docker binary) that run
// c contained by p, in the foreground. Every containment flag is here, on
// the command line, so a test of the line is a test of the containment.
func (p Policy) RunArgv(c Container) []string {
	p = p.WithDefaults()
	argv := []string{"run", "--rm",
		"--name", c.Name,
		"--label", Label + "=" + c.Job,
		"--label", AgentLabel + "=" + c.Agent,
		"--network", c.Network,
		"--read-only",
		"--tmpfs", Scratch + ":rw,exec,nosuid,nodev,size=" + p.Scratch,
		"--user", p.User,
		"--cap-drop", "ALL",
		"--security-opt", "no-new-privileges",
		"--pids-limit", strconv.Itoa(p.PidsLimit),
		"--memory", p.Memory,
		"--memory-swap", p.Memory,
		"--shm-size", p.ShmSize,
		"--cpus", p.CPUs,
		"--ulimit", fmt.Sprintf("nofile=%d:%d", p.NoFile, p.NoFile),
		"--ulimit", fmt.Sprintf("nproc=%d:%d", p.NProc, p.NProc),
		"--ulimit", "core=0:0",
		"--log-driver", "json-file",
		"--log-opt", "max-size=" + p.LogMaxSize,
		"--log-opt", "max-file=" + strconv.Itoa(p.LogMaxFiles),
	}
	card := c.Card
	if card == "" {
		card = c.GPU
	}
	if set := p.CPUSets[card]; set != "" {
		argv = append(argv, "--cpuset-cpus", set)
	}
	if c.GPU != "" {
		// The quotes are part of the value: --gpus parses CSV, and a quoted
		// field keeps a device list together.
		argv = append(argv, "--gpus", `"device=`+c.GPU+`"`)
	}
	for _, m := range c.Mounts {
		mode := ",readonly"
		if m.Writable {
			mode = ""
		}
		argv = append(argv, "--mount", "type=bind,source="+m.Source+",target="+m.Target+mode)
	}
	if c.Workdir != "" {
		argv = append(argv, "--workdir", c.Workdir)
	}
	env := ContainerEnv(c.Env)
	for _, kv := range env {
		argv = append(argv, "--env", kv)
	}
	argv = append(argv, c.Image)
	return append(argv, c.Args...)
}

// ContainerEnv is an engine container's environment beyond its image's:
// offline model hub, HOME on the scratch tmpfs, then extra (never a
// PERFGATE_* name), sorted. Nothing of the agent's own environment.
func ContainerEnv(extra map[string]string) []string {
	m := map[string]string{"HF_HUB_OFFLINE": "1", "HOME": Scratch}
	for k, v := range extra {
		if !Forbidden(k) {
			m[k] = v
		}
	}
	return sorted(m)
}

func sorted(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Forbidden reports a variable name no engine may get: the runner's own
// (PERFGATE_*, which holds its tokens).
func Forbidden(name string) bool {
	return strings.HasPrefix(strings.ToUpper(name), "PERFGATE_")
}

// CommandAllow is the allow-list of the agent's variables a command
// engine inherits: what a process needs to find its tools, libraries and
// locale, and nothing that holds a credential.
var CommandAllow = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM",
	"LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX",
	"HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME",
}

// CommandEnv is a command engine's environment: the variables of host
// named by allow (CommandAllow plus the runner's additions), then extra,
// never a PERFGATE_* name, sorted. Callers append what must win last (the
// GPU pin).
func CommandEnv(host []string, allow []string, extra map[string]string) []string {
	ok := map[string]bool{}
	for _, k := range allow {
		ok[k] = true
	}
	m := map[string]string{"HF_HUB_OFFLINE": "1"}
	for _, kv := range host {
		k, v, _ := strings.Cut(kv, "=")
		if ok[k] && !Forbidden(k) {
			m[k] = v
		}
	}
	for k, v := range extra {
		if !Forbidden(k) {
			m[k] = v
		}
	}
	return sorted(m)
}

// CheckEnv refuses extra variables no engine may get, naming them.
func CheckEnv(extra map[string]string) error {
	var bad []string
	for k := range extra {
		if Forbidden(k) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("engine environment names %s: PERFGATE_* variables are the runner's own and never reach an engine", strings.Join(bad, ", "))
	}
	return nil
}
