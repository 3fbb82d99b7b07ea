package sign

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/internal/meshtest"
)

var blob = []byte(`{"format":1,"mesh":"demo","node":"n1","generation":3}` + "\n")

func newPair(t *testing.T, pw string) (*KeyPair, *Signer) {
	t.Helper()
	kp, err := GenerateKeyPair([]byte(pw))
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSigner(kp.Private, []byte(pw))
	if err != nil {
		t.Fatal(err)
	}
	return kp, s
}

func TestKeyPairFormat(t *testing.T) {
	kp, s := newPair(t, "correct horse")
	if !strings.HasPrefix(string(kp.Private), "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n") {
		t.Errorf("private key is not an encrypted sigstore key:\n%.80s", kp.Private)
	}
	if !strings.HasPrefix(string(kp.Public), "-----BEGIN PUBLIC KEY-----\n") {
		t.Errorf("public key is not a PEM public key:\n%.80s", kp.Public)
	}
	pub, err := s.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	if string(pub) != string(kp.Public) {
		t.Errorf("loaded signer's public key differs from the generated one")
	}
	if _, err := GenerateKeyPair(nil); err == nil {
		t.Error("an empty password was accepted")
	}
}

func TestSignVerify(t *testing.T) {
	kp, s := newPair(t, "pw-one")
	other, _ := newPair(t, "pw-two")
	sig, err := s.Sign(blob)
	if err != nil {
		t.Fatal(err)
	}
	altered := append([]byte(nil), blob...)
	altered[len(altered)-3] = '4'
	tests := []struct {
		name    string
		pub     []byte
		blob    []byte
		sig     []byte
		wantBad bool
	}{
		{"valid", kp.Public, blob, sig, false},
		{"valid with trailing newline", kp.Public, blob, append(append([]byte(nil), sig...), '\n'), false},
		{"altered blob", kp.Public, altered, sig, true},
		{"another key", other.Public, blob, sig, true},
		{"not base64", kp.Public, blob, []byte("!!!"), true},
		{"empty signature", kp.Public, blob, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.pub, tt.blob, tt.sig)
			if tt.wantBad != errors.Is(err, ErrBadSignature) || (!tt.wantBad && err != nil) {
				t.Errorf("Verify = %v, want bad signature %v", err, tt.wantBad)
			}
		})
	}
}

func TestLoadSignerWrongPassword(t *testing.T) {
	kp, _ := newPair(t, "the-right-one")
	_, err := LoadSigner(kp.Private, []byte("the-wrong-one"))
	if err == nil {
		t.Fatal("a wrong password loaded the key")
	}
	if strings.Contains(err.Error(), "the-wrong-one") || strings.Contains(err.Error(), "the-right-one") {
		t.Errorf("error shows a password: %v", err)
	}
	if !strings.Contains(err.Error(), "check the password") {
		t.Errorf("error does not say what to fix: %v", err)
	}
	if _, err := LoadSigner([]byte("not pem"), []byte("x")); err == nil {
		t.Error("garbage loaded as a key")
	}
}

func TestReadPassword(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	tests := []struct {
		name    string
		src     PasswordSource
		want    string
		wantErr string
	}{
		{"env", PasswordSource{Getenv: env(map[string]string{PasswordEnv: "s3cret"})}, "s3cret", ""},
		{"env unset", PasswordSource{Getenv: env(nil)}, "", "COSIGN_PASSWORD is not set"},
		{"env empty", PasswordSource{Getenv: env(map[string]string{PasswordEnv: ""})}, "", "COSIGN_PASSWORD is not set"},
		{"file with newline", PasswordSource{File: write("pw1", "from-file\n")}, "from-file", ""},
		{"file wins over env", PasswordSource{File: write("pw2", "f"), Getenv: env(map[string]string{PasswordEnv: "e"})}, "f", ""},
		{"file empty", PasswordSource{File: write("pw3", "\n")}, "", "is empty"},
		{"file missing", PasswordSource{File: filepath.Join(dir, "nope")}, "", "read signing key password file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadPassword(tt.src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("ReadPassword = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestCosignCLIAcceptsAndSigns checks both directions against the real
// cosign: it verifies our signature with the command line the issue names,
// refuses it on altered content, and signs with a key we generated (so our
// encrypted key format is cosign's) for our Verify to accept.
func TestCosignCLIAcceptsAndSigns(t *testing.T) {
	cosign := meshtest.CosignCLI(t)
	dir := t.TempDir()
	kp, s := newPair(t, "cli-password")
	sig, err := s.Sign(blob)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"reconciler.pub": kp.Public, "reconciler.key": kp.Private,
		"declaration.json": blob, "declaration.json.sig": sig,
		"altered.json": append([]byte("x"), blob...),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(cosign, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	verify := func(blobFile, sigFile string) (string, error) {
		return run(nil, "verify-blob", "--key", "reconciler.pub", "--insecure-ignore-tlog",
			"--signature", sigFile, blobFile)
	}
	if out, err := verify("declaration.json", "declaration.json.sig"); err != nil {
		t.Fatalf("cosign verify-blob refused our signature: %v\n%s", err, out)
	}
	if out, err := verify("altered.json", "declaration.json.sig"); err == nil {
		t.Fatalf("cosign verify-blob accepted an altered blob:\n%s", out)
	}
	out, err := run([]string{PasswordEnv + "=cli-password"}, "sign-blob", "--key", "reconciler.key",
		"--tlog-upload=false", "--yes", "--output-signature", "cli.sig", "declaration.json")
	if err != nil {
		t.Fatalf("cosign sign-blob with our key: %v\n%s", err, out)
	}
	cliSig, err := os.ReadFile(filepath.Join(dir, "cli.sig"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(kp.Public, blob, cliSig); err != nil {
		t.Fatalf("our Verify refused cosign's signature: %v", err)
	}
}
