package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// TestOneShotRotationToTheEnd: one-shot processes drive a two-party
// rotation to the end from hostd's reports, as a timer running `meshgen
// reconcile` would, each phase rendering what ADR 0114 asks: the provider
// ensures the second login before the consumer is given it, and retires the
// first only after the consumer moved and only when its step ran again. A reconcile that confirmed a step records no inputs, so
// the next one runs in full (and may confirm the next step) rather than
// being skipped; once the rotation is done, the next process is skipped.
func TestOneShotRotationToTheEnd(t *testing.T) {
	const secret = "postgres-database.gitea@n2.db"
	m := newMesh(t)
	v := vaulttest.Start(t)
	signer := testSigner(t)
	once := func() *Outcome {
		t.Helper()
		got := runOnce(t, m, v, signer, nil)
		if got.err != nil {
			t.Fatal(got.err)
		}
		return got.out
	}
	generation := func(node string) uint64 {
		var d declaration.Declaration
		if err := json.Unmarshal([]byte(meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+node+":declaration.json")), &d); err != nil {
			t.Fatal(err)
		}
		return d.Generation
	}
	applied := func(node string) {
		g := generation(node)
		m.PushReport(t, node, []byte(fmt.Sprintf(`{"mesh":"lab","node":%q,"generation":%d,"attempted":%d,"source":"x","time":%q}`,
			node, g, g, time.Now().UTC().Format(time.RFC3339Nano))))
	}
	recorded := func() bool {
		files, err := branch.ReadStateFiles(m.Bare)
		if err != nil {
			t.Fatal(err)
		}
		_, ok := files[InputsFile]
		return ok
	}
	once()
	if !once().InputsUnchanged {
		t.Fatal("a settled mesh was reconciled again")
	}
	if _, err := v.Client.Rotate(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	if out := once(); out.InputsUnchanged || !slices.Contains(out.Written, "n1") {
		t.Fatalf("the rotation's start: %+v", out)
	}
	// settle runs one-shot processes until one is skipped, and returns the
	// steps they confirmed. A process that confirmed a step records no
	// inputs, so the next runs in full: it may confirm the next step from
	// reports already there (n1's, for the retiring phase).
	settle := func() []string {
		t.Helper()
		var phases []string
		for range 6 {
			out := once()
			if out.InputsUnchanged {
				return phases
			}
			for _, c := range out.Confirmed {
				phases = append(phases, string(c.Phase))
			}
			if len(out.Confirmed) > 0 && recorded() {
				t.Fatalf("after confirming %+v, the inputs were recorded", out.Confirmed)
			}
		}
		t.Fatal("one-shot reconciles never settled")
		return nil
	}
	// What each phase renders (design 27, "Rotation"): postgres on n1
	// ensures both logins before gitea on n2 is given the second, and
	// retires the first only once gitea moved.
	holds := func(want string) {
		t.Helper()
		if got := rotationView(t, m, secret); got != want {
			t.Fatalf("rendered\n%s\nwant\n%s", got, want)
		}
	}
	holds("n1 ensures gitea__n2=1 gitea__n2__b=2, retires -; n2 reads gitea__n2=1")
	var phases []string
	for i, node := range []string{"n1", "n2", "n1"} {
		applied(node)
		phases = append(phases, settle()...)
		holds([]string{
			"n1 ensures gitea__n2=1 gitea__n2__b=2, retires -; n2 reads gitea__n2__b=2",
			"n1 ensures gitea__n2__b=2, retires gitea__n2; n2 reads gitea__n2__b=2",
			"n1 ensures gitea__n2__b=2, retires -; n2 reads gitea__n2__b=2",
		}[i])
	}
	if want := []string{"applying", "reading", "retiring"}; !slices.Equal(phases, want) {
		t.Fatalf("confirmed %v, want %v", phases, want)
	}
	st, err := v.Client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Secrets {
		if s.Name == secret && s.Rotation != nil {
			t.Fatalf("the rotation did not finish: %+v", s.Rotation)
		}
	}
	if out := once(); !out.InputsUnchanged {
		t.Fatalf("after the rotation finished: %+v", out)
	}
}

// rotationView says what the lab's node branches deliver of the per-consumer
// secret of gitea@n2: the logins (and versions) postgres on n1 ensures and
// retires, and the login and version gitea on n2 presents.
func rotationView(t *testing.T, m *meshtest.Mesh, secret string) string {
	t.Helper()
	decl := func(node string) declaration.Declaration {
		var d declaration.Declaration
		if err := json.Unmarshal([]byte(meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+node+":declaration.json")), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	version := map[string]uint64{} // consumers' file → version
	var info struct {
		Credentials []struct{ Login, SecretFile string }
		Retire      []struct{ Login string }
	}
	for _, r := range decl("n1").Resources {
		switch {
		case r.ID == "postgres/mesh.consumer.gitea__n2.db.json":
			if err := json.Unmarshal([]byte(r.File.Content), &info); err != nil {
				t.Fatal(err)
			}
		case r.File != nil && r.File.Secret != nil && r.File.Secret.Name == secret:
			version[path.Base(r.File.Path)] = r.File.Secret.Version
		}
	}
	var ensures, retires []string
	for _, c := range info.Credentials {
		ensures = append(ensures, fmt.Sprintf("%s=%d", c.Login, version[c.SecretFile]))
	}
	for _, r := range info.Retire {
		retires = append(retires, r.Login)
	}
	if len(retires) == 0 {
		retires = []string{"-"}
	}
	var login string
	var read uint64
	for _, r := range decl("n2").Resources {
		if r.Container != nil && r.ID == "gitea/server" {
			login = r.Container.Env["GITEA__database__USER"]
		}
		if r.File != nil && r.File.Secret != nil && r.File.Secret.Name == secret {
			read = r.File.Secret.Version
		}
	}
	return fmt.Sprintf("n1 ensures %s, retires %s; n2 reads %s=%d", strings.Join(ensures, " "), strings.Join(retires, " "), login, read)
}
