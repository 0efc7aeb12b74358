package keyspace

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// keyed is one record's identity: its kind and the IDs its key is made of.
type keyed struct{ kind, a, b string }

// keysOf returns the key of every record kind for the given IDs, with whose it is.
func keysOf(user, provider, state, run, doc string) map[string]keyed {
	return map[string]keyed{
		Token(user, provider): {"tokens", user, provider},
		Lock(user, provider):  {"token lock", user, provider},
		Session(state):        {"session", state, ""},
		Run(run):              {"run", run, ""},
		RunLock(run):          {"run lock", run, ""},
		Doc(run, doc):         {"document", run, doc},
	}
}

// valid reports whether the IDs are ones the library lets reach a key.
func validIDs(user, provider, state, run, doc string) bool {
	return user != "" && len(user) <= MaxUserIDLen && ValidProviderID(provider) &&
		state != "" && len(state) <= MaxStateLen && IssuedRunID(run) && ValidProviderID(doc)
}

// checkDisjoint fails when two different records of any kind share a key.
func checkDisjoint(t *testing.T, x, y [5]string) {
	t.Helper()
	if !validIDs(x[0], x[1], x[2], x[3], x[4]) || !validIDs(y[0], y[1], y[2], y[3], y[4]) {
		return
	}
	kx, ky := keysOf(x[0], x[1], x[2], x[3], x[4]), keysOf(y[0], y[1], y[2], y[3], y[4])
	if len(kx) != 6 || len(ky) != 6 {
		t.Fatalf("two kinds share a key among %q / %q", x, y)
	}
	for k, who := range kx {
		if other, ok := ky[k]; ok && other != who {
			t.Fatalf("key %q is both %v and %v", k, who, other)
		}
	}
}

// pieces are the fragments hostile IDs are made of.
var pieces = []string{":", "~", "session", "lock", "run", "doc", "sys", "a", "b", "acme", "é", "\x00",
	"0123456789abcdef0123456789abcdef", "c2Vzc2lvbg", "=", "-", "_", "."}

func genID(r *rand.Rand) string {
	var b strings.Builder
	for range 1 + r.IntN(5) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func genIDs(r *rand.Rand) [5]string {
	runs := []string{"0123456789abcdef0123456789abcdef", "ffffffffffffffffffffffffffffffff"}
	return [5]string{genID(r), []string{"acme", "github", "a.b", "run", "session"}[r.IntN(5)], genID(r),
		runs[r.IntN(2)], []string{"oauthPrompt", "a", "lock"}[r.IntN(3)]}
}

// TestKeyspaceDisjoint: over generated IDs built from the fragments keys are
// made of, no two different records of any kind share a key.
func TestKeyspaceDisjoint(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		checkDisjoint(t, genIDs(r), genIDs(r))
	}
}

// FuzzKeyspaceDisjoint: the same property for any bytes.
func FuzzKeyspaceDisjoint(f *testing.F) {
	const run = "0123456789abcdef0123456789abcdef"
	f.Add("session", "acme", "acme", run, "oauthPrompt", "alice", "acme", "x", run, "oauthPrompt")
	f.Add("lock:alice", "acme", "s", run, "a", "alice", "acme", "s", run, "a")
	f.Add("run", run, "s", run, "a", "u", "acme", "s", run, "a")
	f.Add("~c2Vzc2lvbg", "acme", "s", run, "a", "session", "acme", "s", run, "a")
	f.Add("doc:"+run, "x", "s", run, "x", "u", "acme", "s", run, "a")
	f.Fuzz(func(t *testing.T, u1, p1, s1, r1, d1, u2, p2, s2, r2, d2 string) {
		checkDisjoint(t, [5]string{u1, p1, s1, r1, d1}, [5]string{u2, p2, s2, r2, d2})
	})
}
