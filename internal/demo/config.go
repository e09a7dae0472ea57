package demo

// repoConfig is the demo repository's .github/perfgate.yml. The engine
// command is what a real repository would run; the demo's agent replaces
// it with the built-in simulated engine (perfgate agent --sim).
const repoConfig = `paths: ["model/**", "inference_engine/**"]
server:
  command: ["vllm", "serve", "{{.Model}}", "--port", "{{.Port}}"]
  model: perfgate-sim
workload:
  dataset: random
  input_len: 256
  output_len: 64
  max_concurrency: 32
  endpoint: /v1/completions
tiers:
  quick:
    prompts: 100
    repeats: 3
    warmup: 20
`
