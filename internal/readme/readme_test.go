package readme

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// preamble is what every snippet may use without declaring it: the names
// the README's prose introduces (your logger, the user, the module...).
const preamble = `package readme

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
	"github.com/oauthflow/oauthflow/providers"
)

var (
	ctx                       context.Context
	logger, audit             *slog.Logger
	userID, id, secret, cb    string
	server                    string
	creds                     providers.Credentials
	m                         *oauthflow.Module
	tc                        *oauthflow.TransitionContext
	listRepos, whoami         *oauthflow.Tool
	args, res                 json.RawMessage
	impl                      *mcp.Implementation
	checkChildResult          func(context.Context, *oauthflow.TransitionContext) error
	myapp                     struct {
		UserFromSession func(*http.Request) (struct{ ID string }, error)
	}
)
`

// tolerated are the compiler's complaints a fragment earns by being one:
// names it declares for the reader and imports another snippet uses.
var tolerated = regexp.MustCompile(`declared and not used|imported and not used`)

// TestReadmeSnippetsCompile type-checks each Go block of README.md as the
// body of a function, with the preamble's names in scope.
func TestReadmeSnippetsCompile(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, others := ownBlocks(goBlocks(string(readme)))
	if len(blocks) < 10 {
		t.Fatalf("found %d Go blocks in README.md; the reader must have changed", len(blocks))
	}
	if others != 1 {
		t.Fatalf("%d README blocks use the otelevents module; its own test compiles the one it knows", others)
	}
	src, starts := program(blocks)
	out := compile(t, src)
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "snippets.go:") || tolerated.MatchString(line) {
			continue
		}
		t.Errorf("README snippet %d does not compile: %s", snippetAt(line, starts), line)
	}
}

// goBlocks are the bodies of README's ```go fences, in order.
func goBlocks(md string) []string {
	var blocks []string
	for _, part := range strings.Split(md, "```go\n")[1:] {
		body, _, _ := strings.Cut(part, "```")
		blocks = append(blocks, body)
	}
	return blocks
}

// ownBlocks are the blocks this module can compile, and how many use the
// otelevents module (a module of its own, whose tests compile them).
func ownBlocks(blocks []string) ([]string, int) {
	var own []string
	for _, b := range blocks {
		if !strings.Contains(b, "otelevents.") {
			own = append(own, b)
		}
	}
	return own, len(blocks) - len(own)
}

// program is one file with a function per block; starts[i] is the first
// line of block i.
func program(blocks []string) (string, []int) {
	var b strings.Builder
	b.WriteString(preamble)
	starts := make([]int, len(blocks))
	for i, body := range blocks {
		body = regexp.MustCompile(`(?s)^import \(.*?\)\n`).ReplaceAllString(body, "")
		body = strings.ReplaceAll(body, "{ ... }", "{ panic(err) }")
		if strings.HasPrefix(strings.TrimSpace(body), "{") { // a list of transitions
			body = "_ = []oauthflow.Transition{\n" + body + "}\n"
		}
		fmt.Fprintf(&b, "\nfunc snippet%d() error {\n", i+1)
		starts[i] = strings.Count(b.String(), "\n") + 1
		b.WriteString(body)
		b.WriteString("return nil\n}\n")
	}
	return b.String(), starts
}

// compile builds the package with src overlaid as snippets.go and returns
// the compiler's complaints (every one, -e).
func compile(t *testing.T, src string) string {
	dir := t.TempDir()
	file := filepath.Join(dir, "snippets.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	here, _ := filepath.Abs("snippets.go")
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{here: file}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-gcflags=-e", "-overlay", ov, "-o", os.DevNull, ".")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		return ""
	}
	if !strings.Contains(out.String(), "snippets.go:") {
		t.Fatalf("go build failed before reaching the snippets:\n%s", out.String())
	}
	return out.String()
}

// snippetAt is the number of the block that line's position falls in.
func snippetAt(line string, starts []int) int {
	var n int
	_, rest, _ := strings.Cut(line, "snippets.go:")
	fmt.Sscanf(rest, "%d", &n)
	i := 0
	for i+1 < len(starts) && starts[i+1] <= n {
		i++
	}
	return i + 1
}
