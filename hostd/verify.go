package hostd

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// The file names on branch node/<name>.
const (
	DeclarationFile = "declaration.json"
	SignatureFile   = "declaration.json.sig"
)

// Reasons a declaration is refused; a [*Refusal] wraps one or more.
var (
	ErrUnsigned       = errors.New("declaration is unsigned")
	ErrBadSignature   = errors.New("signature does not verify against the enrolment key")
	ErrInvalid        = errors.New("declaration is not valid")
	ErrWrongNode      = errors.New("declaration is for another node")
	ErrWrongMesh      = errors.New("declaration is for another mesh")
	ErrSealedMismatch = errors.New("sealed file does not match its sha256")
	ErrReplay         = errors.New("declaration is older than the one applied (replay)")
	ErrPathPolicy     = errors.New("declaration names a path outside the node's roots")
)

// Refusal is a declaration hostd will not apply, with every reason found.
// Nothing of it was applied and the last applied state was kept.
type Refusal struct {
	Reasons []error
}

func (r *Refusal) Error() string {
	msgs := make([]string, len(r.Reasons))
	for i, e := range r.Reasons {
		msgs[i] = e.Error()
	}
	return "declaration refused: " + strings.Join(msgs, "; ")
}

// Unwrap returns the reasons, for errors.Is(err, ErrReplay) and friends.
func (r *Refusal) Unwrap() []error { return r.Reasons }

// Branch is the content of branch node/<name> at one commit.
type Branch struct {
	// Commit is the branch's commit hash.
	Commit string
	// Declaration is declaration.json.
	Declaration []byte
	// Signature is declaration.json.sig, nil when absent.
	Signature []byte
	// Sealed maps "secrets/<id>.age" to its age ciphertext.
	Sealed map[string][]byte
}

func loadVerifier(pubPEM []byte) (signature.Verifier, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		return nil, fmt.Errorf("read PEM public key: %w", err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("load public key: %w", err)
	}
	return v, nil
}

// VerifySignature checks sig, the content of declaration.json.sig, against
// the enrolment public key pubPEM. The format is exactly what
// `cosign sign-blob --key cosign.key declaration.json` writes: the standard
// base64 encoding of an ASN.1 DER ECDSA signature (P-256) over the SHA-256
// digest of the file's bytes; surrounding white space is ignored. A signer
// makes it with sigstore's signature.LoadECDSASignerVerifier(priv,
// crypto.SHA256).SignMessage(declaration) and base64-encodes the result.
func VerifySignature(pubPEM, decl, sig []byte) error {
	if len(bytes.TrimSpace(sig)) == 0 {
		return ErrUnsigned
	}
	v, err := loadVerifier(pubPEM)
	if err != nil {
		return fmt.Errorf("enrolment key: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(sig)))
	if err != nil {
		return fmt.Errorf("%w: %s is not base64 (%v)", ErrBadSignature, SignatureFile, err)
	}
	if err := v.VerifySignature(bytes.NewReader(raw), bytes.NewReader(decl)); err != nil {
		return fmt.Errorf("%w: signed by another key, or declaration.json was altered", ErrBadSignature)
	}
	return nil
}

// Last is what a new declaration is checked against: the newest one hostd
// adopted.
type Last struct {
	Generation uint64
	// SHA256 is the hex sha256 of that declaration.json; empty when none.
	SHA256 string
}

// Verify decides whether hostd may apply br: signed with the enrolment key,
// valid, for this node and mesh, every sealed file matching its sha256, not
// older than last, and every path under roots. It returns the parsed
// declaration, or a [*Refusal] naming every reason. Nothing is read from an
// unverified declaration beyond its signature.
func Verify(pubPEM []byte, node, mesh string, roots []string, last Last, br Branch) (*declaration.Declaration, error) {
	if br.Signature == nil {
		return nil, &Refusal{Reasons: []error{fmt.Errorf("%w: %s is missing", ErrUnsigned, SignatureFile)}}
	}
	if err := VerifySignature(pubPEM, br.Declaration, br.Signature); err != nil {
		return nil, &Refusal{Reasons: []error{err}}
	}
	d, err := declaration.Parse(br.Declaration)
	if err != nil {
		return nil, &Refusal{Reasons: []error{fmt.Errorf("%w: %w", ErrInvalid, err)}}
	}
	var reasons []error
	if d.Node != node {
		reasons = append(reasons, fmt.Errorf("%w: it names node %q, this is %q", ErrWrongNode, d.Node, node))
	}
	if d.Mesh != mesh {
		reasons = append(reasons, fmt.Errorf("%w: it names mesh %q, this node is in %q", ErrWrongMesh, d.Mesh, mesh))
	}
	sum := sha256.Sum256(br.Declaration)
	if last.SHA256 != "" {
		switch {
		case d.Generation < last.Generation:
			reasons = append(reasons, fmt.Errorf("%w: generation %d is lower than %d", ErrReplay, d.Generation, last.Generation))
		case d.Generation == last.Generation && hex.EncodeToString(sum[:]) != last.SHA256:
			reasons = append(reasons, fmt.Errorf("%w: generation %d was already applied with other content", ErrReplay, d.Generation))
		}
	}
	for _, r := range d.Resources {
		if r.File == nil || r.File.Secret == nil {
			continue
		}
		s := r.File.Secret
		ct, ok := br.Sealed[s.Sealed]
		if !ok {
			reasons = append(reasons, fmt.Errorf("%w: %s (for %q) is missing from the branch", ErrSealedMismatch, s.Sealed, r.ID))
			continue
		}
		if got := sha256.Sum256(ct); hex.EncodeToString(got[:]) != s.SHA256 {
			reasons = append(reasons, fmt.Errorf("%w: %s (for %q)", ErrSealedMismatch, s.Sealed, r.ID))
		}
	}
	reasons = append(reasons, checkPaths(d, roots)...)
	if len(reasons) > 0 {
		return nil, &Refusal{Reasons: reasons}
	}
	return d, nil
}

// checkPaths applies the path policy: every path hostd would write or mount
// is under one of roots (ADR 0005: the node decides what it lets a branch
// touch).
func checkPaths(d *declaration.Declaration, roots []string) []error {
	var errs []error
	check := func(id, what, p string) {
		if !under(p, roots) {
			errs = append(errs, fmt.Errorf("%w: %q %s %s (allowed: %s)", ErrPathPolicy, id, what, p, strings.Join(roots, ", ")))
		}
	}
	for _, r := range d.Resources {
		switch {
		case r.File != nil:
			check(r.ID, "writes", r.File.Path)
		case r.Directory != nil:
			check(r.ID, "makes", r.Directory.Path)
		case r.Container != nil:
			for _, m := range r.Container.Mounts {
				check(r.ID, "mounts", m.Source)
			}
			if r.Container.Answer != "" {
				check(r.ID, "answers in", r.Container.Answer)
			}
		}
	}
	return errs
}

func under(p string, roots []string) bool {
	p = filepath.Clean(p)
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
