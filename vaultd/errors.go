package vaultd

import "fmt"

// refusal is a request vaultd refuses: a message naming the thing (never a
// value), what would fix it, and the client sentinel it maps to.
type refusal struct {
	sentinel error
	msg      string
	hint     string
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.sentinel }

// Hint says what would fix it.
func (r *refusal) Hint() string { return r.hint }

func refuse(sentinel error, hint, format string, args ...any) error {
	return &refusal{sentinel: sentinel, msg: fmt.Sprintf(format, args...), hint: hint}
}
