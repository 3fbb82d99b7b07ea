package branch

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// TestDigestOfAnotherWriter: a tip whose commit states another content
// digest than this writer computes (an older writer's, which hashed the
// compact encoding/json encoding, or a damaged message) or none is compared
// by its canonical bytes instead, so an unchanged declaration still commits
// nothing and the tip is not rewritten; a changed one is written.
func TestDigestOfAnotherWriter(t *testing.T) {
	// oldDigest is how the writer computed digests before they were taken
	// of the canonical bytes: the sha256 of json.Marshal of the declaration
	// with its generation and source zeroed.
	oldDigest := func(t *testing.T, n *Node) string {
		c := *n.Declaration
		c.Generation, c.Source = 0, ""
		b, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		return "Content: " + sha256sum(b)
	}
	for _, tc := range []struct {
		name    string
		restate func(t *testing.T, n *Node) string // the tip's new Content line
	}{
		{"older writer", oldDigest},
		{"damaged", func(*testing.T, *Node) string { return "Content: " + strings.Repeat("0", 64) }},
		{"none", func(*testing.T, *Node) string { return "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			repo, r, opts := localRepo(t)
			if _, err := r.Write(ctx, map[string]*Node{"n1": testNode("n1", "a", 1)}, opts); err != nil {
				t.Fatal(err)
			}
			// Restate the tip's digest as another writer would have.
			tip := strings.TrimSpace(gitRun(t, repo, "rev-parse", "node/n1"))
			msg := gitRun(t, repo, "log", "-1", "--format=%B", tip)
			line := regexp.MustCompile(`(?m)^Content: [0-9a-f]{64}$`)
			ours := line.FindString(msg)
			if ours == "" {
				t.Fatalf("the writer's message states no content digest:\n%s", msg)
			}
			restatedLine := tc.restate(t, testNode("n1", "a", 1))
			if restatedLine == ours {
				t.Fatalf("the restated digest is the writer's own: %s", ours)
			}
			msg = line.ReplaceAllString(msg, restatedLine)
			tree := strings.TrimSpace(gitRun(t, repo, "rev-parse", tip+"^{tree}"))
			args := []string{"commit-tree", tree, "-m", msg}
			if parent, err := gitOut(repo, "rev-parse", "--verify", "-q", tip+"^"); err == nil {
				args = append(args, "-p", strings.TrimSpace(parent))
			}
			restated := strings.TrimSpace(gitRun(t, repo, args...))
			gitRun(t, repo, "update-ref", "refs/heads/node/n1", restated, tip)

			res, err := r.Write(ctx, map[string]*Node{"n1": testNode("n1", "a", 1)}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := outcomes(res)["n1"]; got != Unchanged || res.Objects != 0 {
				t.Fatalf("the same declaration under another digest: %s with %d objects, want unchanged", got, res.Objects)
			}
			if now := strings.TrimSpace(gitRun(t, repo, "rev-parse", "node/n1")); now != restated {
				t.Fatal("the branch moved for an unchanged declaration")
			}
			res, err = r.Write(ctx, map[string]*Node{"n1": testNode("n1", "b", 1)}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := outcomes(res)["n1"]; got != Written {
				t.Fatalf("a changed declaration under another digest: %s, want written", got)
			}
		})
	}
}

// TestContentDigest: the digest does not change with the generation and
// the source, and changes with anything else.
func TestContentDigest(t *testing.T) {
	digest := func(edit func(d *declaration.Declaration)) string {
		t.Helper()
		d := *testNode("n1", "a", 2).Declaration
		d.Resources = append([]declaration.Resource(nil), d.Resources...)
		edit(&d)
		got, err := contentDigest(&d)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	base := digest(func(*declaration.Declaration) {})
	for _, tc := range []struct {
		name string
		edit func(d *declaration.Declaration)
		same bool
	}{
		{"another generation", func(d *declaration.Declaration) { d.Generation = 7 }, true},
		{"another source", func(d *declaration.Declaration) { d.Source = strings.Repeat("b", 40) }, true},
		{"another mesh", func(d *declaration.Declaration) { d.Mesh = "other" }, false},
		{"a resource less", func(d *declaration.Declaration) { d.Resources = d.Resources[1:] }, false},
		{"another file content", func(d *declaration.Declaration) {
			f := *d.Resources[0].File
			f.Content += "more\n"
			d.Resources[0].File = &f
		}, false},
	} {
		if got := digest(tc.edit); (got == base) != tc.same {
			t.Errorf("%s: digest %s, base %s: want same %v", tc.name, got, base, tc.same)
		}
	}
}

// TestSecretsOfTheTipCompared: a tip whose commit states the same content
// digest, but whose secrets/ does not hold exactly the sealed files given (a
// file gone, another's bytes, one more), is written again, with them.
func TestSecretsOfTheTipCompared(t *testing.T) {
	for _, tc := range []struct {
		name   string
		secret func(entries []string) []string // edits `git ls-tree` lines of secrets/
	}{
		{"a sealed file gone", func(e []string) []string { return e[1:] }},
		{"another's bytes", func(e []string) []string {
			e[0] = strings.Replace(e[0], e[0][12:52], e[1][12:52], 1)
			return e
		}},
		{"one more", func(e []string) []string {
			return append(e, strings.Replace(e[0], "web-s0.age", "web-s9.age", 1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			repo, r, opts := localRepo(t)
			if _, err := r.Write(ctx, map[string]*Node{"n1": testNode("n1", "a", 2)}, opts); err != nil {
				t.Fatal(err)
			}
			tip := strings.TrimSpace(gitRun(t, repo, "rev-parse", "node/n1"))
			wantSecrets := gitRun(t, repo, "ls-tree", tip+":"+SecretsDir)
			// The same commit, message and all, over an edited secrets/.
			entries := strings.Split(strings.TrimSpace(wantSecrets), "\n")
			sub, err := gitIn(repo, strings.Join(tc.secret(entries), "\n")+"\n", "mktree")
			if err != nil {
				t.Fatalf("git mktree: %v\n%s", err, sub)
			}
			root := regexp.MustCompile(`(?m)^(040000 tree )[0-9a-f]{40}(\t`+SecretsDir+`)$`).
				ReplaceAllString(gitRun(t, repo, "ls-tree", tip), "${1}"+strings.TrimSpace(sub)+"${2}")
			tree, err := gitIn(repo, root, "mktree")
			if err != nil {
				t.Fatalf("git mktree: %v\n%s", err, tree)
			}
			msg := gitRun(t, repo, "log", "-1", "--format=%B", tip)
			edited := strings.TrimSpace(gitRun(t, repo, "commit-tree", strings.TrimSpace(tree), "-m", msg))
			gitRun(t, repo, "update-ref", "refs/heads/node/n1", edited, tip)

			res, err := r.Write(ctx, map[string]*Node{"n1": testNode("n1", "a", 2)}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := outcomes(res)["n1"]; got != Written {
				t.Fatalf("the branch's sealed files differ: %s, want written", got)
			}
			now := strings.TrimSpace(gitRun(t, repo, "rev-parse", "node/n1"))
			if got := gitRun(t, repo, "ls-tree", now+":"+SecretsDir); got != wantSecrets {
				t.Fatalf("secrets/ after the write:\n%s\nwant:\n%s", got, wantSecrets)
			}
		})
	}
}
