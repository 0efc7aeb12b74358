package readme

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/providers"
)

// preamble is what every snippet may use without declaring it: the names
// the manual's prose introduces (your logger, the user, the module...).
const preamble = `package readme

import (
	"context"
	"crypto"
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
	"github.com/redis/go-redis/v9"
)

var (
	ctx                       context.Context
	logger, audit             *slog.Logger
	userID, id, secret, cb    string
	server                    string
	creds                     providers.Credentials
	signingKey                crypto.Signer
	m                         *oauthflow.Module
	mux                       *http.ServeMux
	client                    redis.UniversalClient
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

// snippet is one Go block of a page of the manual.
type snippet struct {
	page string // "README.md", "docs/tokens.md"
	n    int    // its place among the page's Go blocks, from 1
	body string
}

func (s snippet) String() string { return fmt.Sprintf("%s snippet %d", s.page, s.n) }

// program reports whether the block is a whole program, not a fragment.
func (s snippet) program() bool { return strings.HasPrefix(s.body, "package main\n") }

// TestSnippetsCompile type-checks each Go block of README.md and of the pages
// under docs/: a fragment as the body of a function, with the preamble's
// names in scope, and a whole program as a package of its own.
func TestSnippetsCompile(t *testing.T) {
	var fragments, programs []snippet
	others, temporal := map[string]int{}, map[string]int{}
	for _, p := range manual(t) {
		for _, s := range p.snippets() {
			switch {
			case strings.Contains(s.body, "otelevents."):
				others[s.page]++
			case strings.Contains(s.body, "oauthtemporal."):
				temporal[s.page]++
			case s.program():
				programs = append(programs, s)
			default:
				fragments = append(fragments, s)
			}
		}
	}
	if len(fragments) < 15 {
		t.Fatalf("found %d Go fragments in the manual; the reader must have changed", len(fragments))
	}
	if len(others) != 1 || others["README.md"] != 1 {
		t.Fatalf("blocks that use the otelevents module: %v; want one, in README.md, which that module's own test compiles", others)
	}
	if len(temporal) != 2 || temporal["docs/temporal.md"] != 1 || temporal["README.md"] != 1 {
		t.Fatalf("blocks that use the temporal module: %v; want one in README.md and one in docs/temporal.md, which that module's own test compiles", temporal)
	}
	src, starts := fragmentFile(fragments)
	for _, line := range strings.Split(compile(t, "snippets.go", src), "\n") {
		if !strings.Contains(line, "snippets.go:") || tolerated.MatchString(line) {
			continue
		}
		t.Errorf("%v does not compile: %s", fragments[snippetAt(line, starts)], line)
	}
	for i, s := range programs {
		file := fmt.Sprintf("program%d/main.go", i+1)
		for _, line := range strings.Split(compile(t, file, s.body), "\n") {
			if strings.Contains(line, "main.go:") {
				t.Errorf("%v, a whole program, does not compile: %s", s, line)
			}
		}
	}
}

// page is one Markdown file of the manual, named from the module root.
type page struct {
	name, text string
}

// manual is README.md and every page under docs/.
func manual(t *testing.T) []page {
	t.Helper()
	names, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	names = append([]string{"../../README.md"}, names...)
	pages := make([]page, len(names))
	for i, name := range names {
		text, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		pages[i] = page{strings.TrimPrefix(name, "../../"), string(text)}
	}
	return pages
}

// snippets are the bodies of the page's ```go fences, in order.
func (p page) snippets() []snippet {
	var blocks []snippet
	for i, part := range strings.Split(p.text, "```go\n")[1:] {
		body, _, _ := strings.Cut(part, "```")
		blocks = append(blocks, snippet{page: p.name, n: i + 1, body: body})
	}
	return blocks
}

// fragmentFile is one file with a function per fragment; starts[i] is the
// first line of fragment i.
func fragmentFile(fragments []snippet) (string, []int) {
	var b strings.Builder
	b.WriteString(preamble)
	starts := make([]int, len(fragments))
	for i, s := range fragments {
		body := regexp.MustCompile(`(?s)^import \(.*?\)\n`).ReplaceAllString(s.body, "")
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

// compile builds the package that holds file (a path under this directory,
// absent from it) with src overlaid as that file, and returns the compiler's
// complaints (every one, -e).
func compile(t *testing.T, file, src string) string {
	t.Helper()
	dir := t.TempDir()
	tmp := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(tmp, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	here, _ := filepath.Abs(file)
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{here: tmp}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-gcflags=-e", "-overlay", ov, "-o", os.DevNull, "./"+filepath.Dir(file))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		return ""
	}
	if !strings.Contains(out.String(), filepath.Base(file)+":") {
		t.Fatalf("go build failed before reaching %s:\n%s", file, out.String())
	}
	return out.String()
}

// snippetAt is the index of the fragment that line's position falls in.
func snippetAt(line string, starts []int) int {
	var n int
	_, rest, _ := strings.Cut(line, "snippets.go:")
	fmt.Sscanf(rest, "%d", &n)
	i := 0
	for i+1 < len(starts) && starts[i+1] <= n {
		i++
	}
	return i
}

// firstScreen is how many lines of the README a reader sees before
// scrolling: the two commands and the whole service must be among them.
const firstScreen = 65

// TestReadmeStartsWithHello: the README's first screen holds the quickstart,
// the test command exactly as CI runs it, and a whole program.
func TestReadmeStartsWithHello(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(readme), "\n")
	top := strings.Join(lines[:min(firstScreen, len(lines))], "")
	commands := map[string]bool{}
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(top, -1) {
		for _, line := range strings.Split(block[1], "\n") {
			command, _, _ := strings.Cut(line, " #")
			commands[strings.TrimSpace(command)] = true
		}
	}
	for _, want := range []string{"go run ./examples/quickstart", ciCommand(t)} {
		if !commands[want] {
			t.Errorf("the README's first %d lines lack the command %q", firstScreen, want)
		}
	}
	program := regexp.MustCompile("(?s)```go\npackage main\n.*?\n```\n").FindString(top)
	if program == "" || !strings.HasSuffix(program, "}\n```\n") {
		t.Errorf("the README's first %d lines hold no whole program, from package main to its closing fence", firstScreen)
	}
}

// ciCommand is the test command of .ci/run: its last line.
func ciCommand(t *testing.T) string {
	t.Helper()
	run, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(run)), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "go test ") {
		t.Fatalf(".ci/run ends with %q, not its test command", last)
	}
	return last
}

// TestManualLinks: the README's map links every page under docs/ once and
// every other Markdown file of the root, and every link of the manual lands
// on a file of the repository and, when it names one, on a heading there.
func TestManualLinks(t *testing.T) {
	pages := manual(t)
	counts := map[string]int{}
	for _, target := range links(pages[0].text) {
		file, _, _ := strings.Cut(target, "#")
		counts[file]++
	}
	roots, _ := filepath.Glob("../../*.md")
	for _, name := range roots {
		if name := filepath.Base(name); name != "README.md" && counts[name] == 0 {
			t.Errorf("README.md does not link %s", name)
		}
	}
	for _, p := range pages[1:] {
		if counts[p.name] != 1 {
			t.Errorf("README.md links %s %d times; its map links each page once", p.name, counts[p.name])
		}
	}
	for _, p := range pages {
		for _, target := range links(p.text) {
			if err := lands(p.name, target); err != nil {
				t.Errorf("%s: the link %q: %v", p.name, target, err)
			}
		}
	}
}

// links are the targets of a Markdown text's links and images, outside code
// blocks, leaving out those to other sites.
func links(md string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\]\(([^)\s]+)\)`).FindAllStringSubmatch(prose(md), -1) {
		if !regexp.MustCompile(`^[a-z]+:`).MatchString(m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// prose is md without its fenced code blocks.
func prose(md string) string {
	return regexp.MustCompile("(?s)\n```.*?\n```").ReplaceAllString(md, "")
}

// lands reports why the link target, met in the page from (named from the
// module root), leads nowhere; nil when it reaches a file and its heading.
func lands(from, target string) error {
	file, anchor, _ := strings.Cut(target, "#")
	path := filepath.Join(filepath.Dir(from), file)
	if file == "" {
		path = from
	}
	if _, err := os.Stat(filepath.Join("../..", path)); err != nil {
		return fmt.Errorf("no file %s", path)
	}
	if anchor == "" {
		return nil
	}
	text, err := os.ReadFile(filepath.Join("../..", path))
	if err != nil || !strings.HasSuffix(path, ".md") {
		return fmt.Errorf("an anchor into %s, which is not a page", path)
	}
	if !anchors(string(text))[anchor] {
		return fmt.Errorf("%s has no heading #%s", path, anchor)
	}
	return nil
}

// anchors are the ids GitHub gives a page's headings: lower case, spaces
// made hyphens, other punctuation dropped, a repeat numbered.
func anchors(md string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for _, line := range strings.Split(prose(md), "\n") {
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		id := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(title)), ""), " ", "-")
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

// TestDeviceGrantProviders: the device grant's page lists exactly the
// catalog's entries with a device authorization endpoint.
func TestDeviceGrantProviders(t *testing.T) {
	text, err := os.ReadFile("../../docs/device.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(text), "\n## Which providers\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var listed []string
	for _, m := range regexp.MustCompile(`\]\(providers\.md#([a-z0-9_-]+)\)`).FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1])
	}
	var want []string
	for _, id := range providers.Known() {
		e, err := providers.Lookup(id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Config.DeviceAuthURL != "" {
			want = append(want, id)
		}
	}
	if len(want) == 0 {
		t.Fatal("no catalog entry has a device authorization endpoint; the catalog must have changed")
	}
	if !slices.Equal(listed, want) {
		t.Errorf("docs/device.md, \"Which providers\", lists %v; the catalog's entries with a device grant are %v", listed, want)
	}
}

// TestProviderCount: wherever the manual counts the catalog's providers, it
// counts them all.
func TestProviderCount(t *testing.T) {
	count := regexp.MustCompile(`\b(\d+) providers\b`)
	want := strconv.Itoa(len(providers.Known()))
	found := 0
	for _, p := range manual(t) {
		for _, m := range count.FindAllStringSubmatch(p.text, -1) {
			found++
			if m[1] != want {
				t.Errorf("%s says %q; the catalog has %s", p.name, m[0], want)
			}
		}
	}
	if found == 0 {
		t.Error("the manual never counts the catalog's providers; the README says how many there are")
	}
}

// TestNoAbsentDocuments: the manual cites only documents the repository
// has. A rule that lived in a document it lacks is stated where it applies.
func TestNoAbsentDocuments(t *testing.T) {
	cited := regexp.MustCompile(`\b(SPEC|DESIGN)\b|\b[A-Z][A-Z0-9_-]*\.md\b`)
	for _, p := range manual(t) {
		if generated[p.name] {
			continue
		}
		for _, name := range cited.FindAllString(p.text, -1) {
			if !strings.HasSuffix(name, ".md") {
				t.Errorf("%s cites %s, which the repository does not have: state the rule instead", p.name, name)
				continue
			}
			if !exists(filepath.Join("../..", name)) && !exists(filepath.Join("../../docs", name)) {
				t.Errorf("%s names %s, which the repository does not have", p.name, name)
			}
		}
	}
}

// generated are the pages a program writes, from text kept beside it: the
// catalog's page and the scale report.
var generated = map[string]bool{"docs/providers.md": true, "docs/SCALE.md": true}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestKeyPrefixSeparator holds docs/operations.md to the code: a prefix is
// put before each key as it is, so the separator is the caller's, and New
// takes a KeyPrefix that ends in one of the separators the page lists, and
// no other.
func TestKeyPrefixSeparator(t *testing.T) {
	text, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	page := strings.Join(strings.Fields(string(text)), " ")
	if !strings.Contains(page, "The separator is yours") || !strings.Contains(page, "`billing:oauth:{user}:{provider}`") {
		t.Fatal("docs/operations.md no longer says the separator is the caller's; change this test with it")
	}
	list := regexp.MustCompile("does not end in one of ((?:`[^`]+` ?)+)").FindStringSubmatch(page)
	if list == nil {
		t.Fatal("docs/operations.md no longer lists the separators a KeyPrefix may end in")
	}
	listed := strings.ReplaceAll(strings.ReplaceAll(list[1], "`", ""), " ", "")
	for c := byte('!'); c <= '~'; c++ {
		if isAlnum(c) {
			continue
		}
		prefix := "billing" + string(c)
		m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), KeyPrefix: prefix})
		if err == nil {
			m.Close()
		}
		if took, says := err == nil, strings.IndexByte(listed, c) >= 0; took != says {
			t.Errorf("New with KeyPrefix %q: %v; the page's separators are %s", prefix, err, listed)
		}
	}
	ctx := context.Background()
	store := oauthflow.NewMemoryKV()
	if err := oauthflow.WithKeyPrefix(store, "billing:").Set(ctx, "oauth:u:p", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := store.Get(ctx, "billing:oauth:u:p"); err != nil || string(v) != "v" {
		t.Errorf("KeyPrefix \"billing:\": billing:oauth:u:p holds %q, %v; the page says the record is stored there", v, err)
	}
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
