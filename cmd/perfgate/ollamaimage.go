package main

import (
	"context"
	"fmt"

	"github.com/perfgate/perfgate/internal/demo"
)

func init() {
	register("ollama-image", command{summary: "build the real engine's image (Ollama, FROM scratch from this host's files, no registry) for the sandbox", run: runOllamaImage})
}

// runOllamaImage builds demo.OllamaImageTag from the host's ollama binary
// and prints the pinned reference a repository writes as server.image.
func runOllamaImage(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("ollama-image", "[--ollama PATH] [--docker BINARY]")
	ollama := fs.String("ollama", "", "the ollama binary ($OLLAMA_BIN, PATH or the Go bin directory when empty)")
	docker := fs.String("docker", "docker", "the docker client")
	fs.epilog = "Then, in .github/perfgate.yml: server.image: <the printed pin>, server.args: [bash, \"{{.Workdir}}/inference_engine/serve.sh\", \"{{.Port}}\"], server.port: 8000.\n"
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "perfgate ollama-image: unexpected arguments %q\n", fs.Args())
		return 3
	}
	bin := *ollama
	if bin == "" {
		var err error
		if bin, err = demo.FindOllama(); err != nil {
			fmt.Fprintf(env.stderr, "perfgate ollama-image: %v\n", err)
			return 1
		}
	}
	img, err := demo.BuildOllamaImage(ctx, *docker, bin)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate ollama-image: %v\n", err)
		return 1
	}
	fmt.Fprintf(env.stdout, "built %s (%s from %s): %.1f MB, %d files from this host\nserver.image: %s\n",
		img.Tag, demo.OllamaIdentity(bin), bin, float64(img.Size)/1e6, len(img.Files), img.Pin)
	return 0
}
