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
	"github.com/meshgen/meshgen/reconciler/sign"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// TestOneShotRotationToTheEnd: one-shot processes drive a two-party
// rotation to the end from hostd's reports, as a timer running `meshgen
// reconcile` would, each phase rendering what ADR 0114 asks: the provider
// ensures the second login before the consumer is given it, and retires the
// first only after the consumer moved and only when its step ran again. A
// reconcile that confirmed a step records no inputs, so the next one runs
// in full (and may confirm the next step) rather than being skipped; once
// the rotation is done, the next process is skipped.
func TestOneShotRotationToTheEnd(t *testing.T) {
	const secret = "postgres-database.gitea@n2.db"
	b := newRotationBed(t, newMesh(t))
	m, v, once, applied := b.m, b.v, b.once, b.applied
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
		if got := rotationView(t, m, secret, "n1", "n2", "gitea__n2"); got != want {
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

// rotationBed runs one-shot reconciles of a mesh against a real vaultd, and
// reports nodes as hostd would.
type rotationBed struct {
	t      *testing.T
	m      *meshtest.Mesh
	v      *vaulttest.Vault
	signer *sign.Signer
}

func newRotationBed(t *testing.T, m *meshtest.Mesh) *rotationBed {
	return &rotationBed{t: t, m: m, v: vaulttest.Start(t), signer: testSigner(t)}
}

// once runs one `meshgen reconcile` process.
func (b *rotationBed) once() *Outcome {
	b.t.Helper()
	got := runOnce(b.t, b.m, b.v, b.signer, nil)
	if got.err != nil {
		b.t.Fatal(got.err)
	}
	return got.out
}

// applied reports node as having applied, without a failure, the latest
// generation on its branch.
func (b *rotationBed) applied(node string) {
	b.t.Helper()
	var d declaration.Declaration
	if err := json.Unmarshal([]byte(meshtest.Git(b.t, b.m.Bare, "cat-file", "blob", "node/"+node+":declaration.json")), &d); err != nil {
		b.t.Fatal(err)
	}
	b.m.PushReport(b.t, node, []byte(fmt.Sprintf(`{"mesh":"lab","node":%q,"generation":%d,"attempted":%d,"source":"x","time":%q}`,
		node, d.Generation, d.Generation, time.Now().UTC().Format(time.RFC3339Nano))))
}

// rotationView says what the lab's node branches deliver of gitea's
// per-consumer secret: the logins (and versions) postgres on node db
// ensures and retires, and the login and version gitea (whose identity
// login is login) on node app presents.
func rotationView(t *testing.T, m *meshtest.Mesh, secret, db, app, login string) string {
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
	for _, r := range decl(db).Resources {
		switch {
		case r.ID == "postgres/mesh.consumer."+login+".db.json":
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
	var presents string
	var read uint64
	for _, r := range decl(app).Resources {
		if r.Container != nil && r.ID == "gitea/server" {
			presents = r.Container.Env["GITEA__database__USER"]
		}
		if r.ID == "gitea/db-password" {
			read = r.File.Secret.Version
		}
	}
	return fmt.Sprintf("%s ensures %s, retires %s; %s reads %s=%d", db, strings.Join(ensures, " "), strings.Join(retires, " "), app, presents, read)
}

// TestRotationOnANodeBothProviderAndConsumer: with gitea on postgres's
// node, that node holds the per-consumer secret in both roles. Its postgres
// ensures the second login while its gitea keeps reading the first, and
// gitea's read is confirmed only once the node applied a declaration whose
// gitea reads the new one: holding it as the applier is no read.
func TestRotationOnANodeBothProviderAndConsumer(t *testing.T) {
	const secret = "postgres-database.gitea@n1.db"
	m := newMesh(t)
	meshtest.Git(t, m.Work, "mv", "assignments/n2/gitea.yaml", "assignments/n1/gitea.yaml")
	m.Push(t, "gitea moves to its database's node")
	b := newRotationBed(t, m)
	v, once := b.v, b.once
	applied := func() { b.applied("n1") }
	view := func(want string) {
		t.Helper()
		if got := rotationView(t, m, secret, "n1", "n1", "gitea__n1"); got != want {
			t.Fatalf("rendered\n%s\nwant\n%s", got, want)
		}
	}
	once()
	if _, err := v.Client.Rotate(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	once()
	view("n1 ensures gitea__n1=1 gitea__n1__b=2, retires -; n1 reads gitea__n1=1")
	var phases []string
	for _, want := range []string{
		"n1 ensures gitea__n1=1 gitea__n1__b=2, retires -; n1 reads gitea__n1__b=2",
		"n1 ensures gitea__n1__b=2, retires gitea__n1; n1 reads gitea__n1__b=2",
		"n1 ensures gitea__n1__b=2, retires -; n1 reads gitea__n1__b=2",
	} {
		applied()
		out := once()
		if len(out.Confirmed) != 1 {
			t.Fatalf("one apply of n1 confirmed %+v, want one step", out.Confirmed)
		}
		phases = append(phases, string(out.Confirmed[0].Phase))
		view(want)
		// Until n1 applies what was just rendered, nothing more is
		// confirmed: in the reading phase, n1 already holds the new
		// value as gitea's provider, but its gitea does not read it yet.
		if out := once(); len(out.Confirmed) != 0 {
			t.Fatalf("confirmed %+v with no new apply of n1", out.Confirmed)
		}
	}
	if want := []string{"applying", "reading", "retiring"}; !slices.Equal(phases, want) {
		t.Fatalf("confirmed %v, want %v", phases, want)
	}
}
