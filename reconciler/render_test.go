package reconciler

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// TestNoSecretValueInDeclarations plays the vault for the lab case: it makes
// a value for every secret the resolution needs, seals it with age to each
// recipient node's own key, and renders with what it sealed. No value appears
// in any declaration, in the plan (markdown or JSON), or in the resolution's
// text, in plain or base64 form; every reference names a ciphertext whose
// sha256 matches and which the node's identity opens to the value.
func TestNoSecretValueInDeclarations(t *testing.T) {
	repo, opts := loadCase(t, "lab")
	ids := map[string]*age.X25519Identity{}
	for name, n := range repo.Nodes {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
		n.Recipient = id.Recipient().String()
	}
	res, err := Resolve(repo, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Secrets) == 0 {
		t.Fatal("the lab case needs no secret: the test would check nothing")
	}
	branch := t.TempDir() // node → secrets/<id>.age, as the loop writes them
	values := map[string]string{}
	sealed := SealedMap{}
	for _, s := range res.Secrets {
		buf := make([]byte, 24)
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		values[s.Name] = hex.EncodeToString(buf)
		for _, node := range s.Nodes() {
			var ct bytes.Buffer
			w, err := age.Encrypt(&ct, ids[node].Recipient())
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(w, values[s.Name])
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			p := SealedPath(s.Name, 1)
			file := filepath.Join(branch, node, p)
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, ct.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(ct.Bytes())
			held := Held{Current: Credential{SealedSecret: SealedSecret{Version: 1, SHA256: hex.EncodeToString(sum[:]), Path: p}}}
			for _, rc := range s.Recipients {
				if rc.Node == node {
					sealed[SealedKey(s.Name, node, rc.Role)] = held
				}
			}
		}
	}
	decls, err := Render(res, sealed)
	if err != nil {
		t.Fatal(err)
	}
	var outputs []string
	refs := 0
	for node, d := range decls {
		data, err := declaration.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, string(data))
		for _, r := range d.Resources {
			if r.File == nil || r.File.Secret == nil {
				continue
			}
			refs++
			ref := r.File.Secret
			ct, err := os.ReadFile(filepath.Join(branch, node, ref.Sealed))
			if err != nil {
				t.Fatalf("%s on %s names %s, which was not sealed to it: %v", r.ID, node, ref.Sealed, err)
			}
			if sum := sha256.Sum256(ct); hex.EncodeToString(sum[:]) != ref.SHA256 {
				t.Fatalf("%s on %s: sha256 of %s does not match", r.ID, node, ref.Sealed)
			}
			pt, err := age.Decrypt(bytes.NewReader(ct), ids[node])
			if err != nil {
				t.Fatalf("%s on %s: the node cannot open %s: %v", r.ID, node, ref.Sealed, err)
			}
			got, _ := io.ReadAll(pt)
			if string(got) != values[ref.Name] {
				t.Fatalf("%s on %s opens to another secret's value", r.ID, node)
			}
		}
	}
	if refs == 0 {
		t.Fatal("no declaration refers to a secret: the test would check nothing")
	}
	p, err := MakePlan(PlanOptions{Head: repo, Answers: opts.Answers})
	if err != nil {
		t.Fatal(err)
	}
	js, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, string(p.Markdown()), string(js), dumpResolution(res))
	for name, v := range values {
		for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
			for _, out := range outputs {
				if strings.Contains(out, form) {
					t.Fatalf("the value of secret %s appears in an output", name)
				}
			}
		}
	}
}

// TestRenderIsDeterministic: rendering one resolution twice, and resolving
// again and rendering, give the same bytes.
func TestRenderIsDeterministic(t *testing.T) {
	repo, opts := loadCase(t, "lab")
	a, err := snapshot(repo, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		b, err := snapshot(repo, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("render %d differs:\n%s", i, lineDiff(string(a), string(b)))
		}
	}
}

// TestWaitingDeliversNothing: while the certificate authority has not
// answered, no resource of the proxy's declaration carries anything that
// depends on the answer, and the proxy's other resources are still there.
func TestWaitingDeliversNothing(t *testing.T) {
	repo, opts := loadCase(t, "waiting")
	res, err := Resolve(repo, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Waiting) != 1 || res.Waiting[0].Assignment != "proxy@n2" || res.Waiting[0].Provider != "ca@n3" {
		t.Fatalf("waiting = %+v, want proxy@n2 waiting for ca@n3", res.Waiting)
	}
	decls, err := Render(res, Unsealed{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range decls["n2"].Resources {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, " ") != "proxy/conf" {
		t.Fatalf("n2 holds %v; want only proxy/conf while the answer is missing", ids)
	}

	// Once the answer arrives, everything is delivered.
	opts.Answers = Answers{"n3": {"ca/init": {"url": "https://ca", "fingerprint": "ff"}}}
	res, err = Resolve(repo, opts)
	if err != nil {
		t.Fatal(err)
	}
	decls, err = Render(res, Unsealed{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(decls["n2"].Resources); n != 4 {
		t.Fatalf("n2 holds %d resources after the answer, want 4", n)
	}
	if c := decls["n2"].Resources[1].File.Content; !strings.Contains(c, "CA_URL=https://ca") {
		t.Fatalf("the binding does not carry the answer: %q", c)
	}
}

// TestRenderRefusesAnUnsealedSecret: rendering needs every secret sealed to
// every node that reads it, and says which is missing.
func TestRenderRefusesAnUnsealedSecret(t *testing.T) {
	repo, opts := loadCase(t, "lab")
	res, err := Resolve(repo, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Render(res, SealedMap{})
	if err == nil || !strings.Contains(err.Error(), `is not sealed to node`) {
		t.Fatalf("got %v, want an error naming the unsealed secret", err)
	}
}

// TestSealedPathsAreDistinct: two secret names, two versions, or a value
// and its derived form never share a sealed file, and every path is one
// hostd accepts.
func TestSealedPathsAreDistinct(t *testing.T) {
	names := []string{"a@b.c", "a_b.c", "a-b.c", "a/b.c", "postgres-database.gitea@n2.db", "postgres-database.gitea_n2.db"}
	seen := map[string]string{}
	for _, n := range names {
		for _, v := range []uint64{0, 1, 2, 12} {
			for _, p := range []string{SealedPath(n, v), DerivedPath(n, v)} {
				if other, dup := seen[p]; dup {
					t.Fatalf("%q version %d and %s share %s", n, v, other, p)
				}
				seen[p] = fmt.Sprintf("%q version %d", n, v)
				d := &declaration.Declaration{Format: declaration.Version, Mesh: "m", Node: "n", Resources: []declaration.Resource{{
					ID: "m/f", Kind: declaration.KindFile, Module: "m",
					File: &declaration.File{Path: "/f", Mode: "0600", Secret: &declaration.SecretRef{Name: n, Sealed: p, SHA256: strings.Repeat("0", 64)}},
				}}}
				if err := d.Validate(); err != nil {
					t.Fatalf("hostd refuses %s: %v", p, err)
				}
			}
		}
	}
}

// TestConsumerInfoJSON: the consumer file is JSON that reads back as what
// was written, for plain names and for anything else, with one credential
// and one retired login a line for a provisioner's shell.
func TestConsumerInfoJSON(t *testing.T) {
	type cred struct {
		Login       string `json:"login"`
		SecretFile  string `json:"secretFile"`
		DerivedFile string `json:"derivedFile,omitempty"`
	}
	type retired struct {
		Login string `json:"login"`
	}
	type info struct {
		Consumer    string    `json:"consumer"`
		Requirement string    `json:"requirement"`
		Contract    string    `json:"contract"`
		Name        string    `json:"name"`
		Login       string    `json:"login"`
		Credentials []cred    `json:"credentials"`
		Retire      []retired `json:"retire"`
	}
	for _, tt := range []struct {
		in    consumerInfo
		lines []string // lines the file must hold as they are
	}{
		{consumerInfo{Consumer: "gitea@n2", Requirement: "db", Contract: "postgres-database", Name: "gitea.n2", Login: "gitea__n2",
			Credentials: []credentialInfo{{Login: "gitea__n2", SecretFile: "gitea__n2.db.password"}}},
			[]string{`  "login": "gitea__n2",`, `    {"login": "gitea__n2", "secretFile": "gitea__n2.db.password"}`, `  "retire": []`}},
		{consumerInfo{Consumer: "m@n", Requirement: "mqtt", Contract: "mqtt-broker", Name: "m.n", Login: "m__n",
			Credentials: []credentialInfo{{Login: "m__n", SecretFile: "m__n.mqtt.password", DerivedFile: "m__n.mqtt.password.mosquitto-pbkdf2"},
				{Login: "m__n__b", SecretFile: "m__n__b.mqtt.password"}},
			Retire: []string{"m__n"}},
			[]string{`    {"login": "m__n", "secretFile": "m__n.mqtt.password", "derivedFile": "m__n.mqtt.password.mosquitto-pbkdf2"},`,
				`    {"login": "m__n__b", "secretFile": "m__n__b.mqtt.password"}`, `    {"login": "m__n"}`}},
		{consumerInfo{Consumer: "a<b>&\"c\\", Requirement: "é", Contract: "\n", Name: "", Login: "x",
			Credentials: []credentialInfo{{Login: "x", SecretFile: "y"}}}, nil},
	} {
		got := tt.in.json()
		var back info
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Fatalf("%v\n%s", err, got)
		}
		want := info{Consumer: tt.in.Consumer, Requirement: tt.in.Requirement, Contract: tt.in.Contract, Name: tt.in.Name, Login: tt.in.Login, Retire: []retired{}}
		for _, c := range tt.in.Credentials {
			want.Credentials = append(want.Credentials, cred(c))
		}
		for _, l := range tt.in.Retire {
			want.Retire = append(want.Retire, retired{l})
		}
		if !reflect.DeepEqual(back, want) {
			t.Errorf("reads back as\n%+v\nwant\n%+v\nfrom\n%s", back, want, got)
		}
		for _, l := range tt.lines {
			if !slices.Contains(strings.Split(got, "\n"), l) {
				t.Errorf("no line %q in\n%s", l, got)
			}
		}
	}
}
