package hostd

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"filippo.io/age"
)

// IdentityFile is the file name [Init] writes the node's age identity to.
const IdentityFile = "age-identity.txt"

// Init makes the node's age identity in dir/age-identity.txt (mode 0600)
// and returns its recipient, the "age1..." line for nodes/<node>.yaml. The
// identity never leaves the node. When the file exists it is kept and its
// recipient returned, so enrolment can be repeated safely.
func Init(dir string) (recipient string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("make identity directory: %w", err)
	}
	path := filepath.Join(dir, IdentityFile)
	if _, err := os.Stat(path); err == nil {
		ids, err := readIdentity(path)
		if err != nil {
			return "", err
		}
		x, ok := ids[0].(*age.X25519Identity)
		if !ok {
			return "", fmt.Errorf("identity %s is not an X25519 age identity", path)
		}
		return x.Recipient().String(), nil
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", fmt.Errorf("generate age identity: %w", err)
	}
	body := fmt.Sprintf("# made by hostd init; public key: %s\n%s\n", id.Recipient(), id)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("write age identity: %w", err)
	}
	_, werr := f.WriteString(body)
	serr := f.Sync()
	if err := errors.Join(werr, serr, f.Close()); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("write age identity %s: %w", path, err)
	}
	return id.Recipient().String(), nil
}

func readIdentity(path string) ([]age.Identity, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("age identity %s does not exist: run `hostd init` on this node", path)
	}
	if err != nil {
		return nil, fmt.Errorf("read age identity: %w", err)
	}
	ids, err := age.ParseIdentities(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("read age identity %s: %w", path, err)
	}
	return ids, nil
}
