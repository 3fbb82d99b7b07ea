package client

import (
	"errors"
	"fmt"
)

// Codes of [ErrorBody.Code], one per sentinel error.
const (
	CodeBadRequest   = "bad-request"
	CodeNotFound     = "not-found"
	CodeRefused      = "refused-recipient"
	CodeNotRotatable = "not-rotatable"
	CodeOperator     = "operator-value"
	CodeNotDelivered = "not-delivered"
	CodeConflict     = "conflict"
	CodeForbidden    = "forbidden"
	CodeInternal     = "internal"
)

// Sentinel errors a caller branches on with errors.Is. Every error the client
// returns for a refused request is an [*Error] wrapping one of them.
var (
	// ErrBadRequest: the request is malformed (a bad name, spec, version).
	ErrBadRequest = errors.New("bad request")
	// ErrNotFound: no secret of that name, or no such rotation.
	ErrNotFound = errors.New("not found")
	// ErrRefusedRecipient: a recipient is not a node of the mesh.
	ErrRefusedRecipient = errors.New("recipient refused")
	// ErrNotRotatable: the secret is marked not rotatable.
	ErrNotRotatable = errors.New("not rotatable")
	// ErrOperatorValue: the secret is an operator's value; vaultd never
	// replaces it.
	ErrOperatorValue = errors.New("operator value")
	// ErrNotDelivered: an operator's value was asked for before the operator
	// delivered it. A state, not a failure: the consumer waits.
	ErrNotDelivered = errors.New("not delivered")
	// ErrConflict: the request does not fit the secret's state (a rotation
	// already running, a confirmation out of turn, an abandon too late).
	ErrConflict = errors.New("conflict")
	// ErrForbidden: the caller is not the socket's owner.
	ErrForbidden = errors.New("forbidden")
	// ErrInternal: vaultd failed (its store, its disk).
	ErrInternal = errors.New("vaultd internal error")
)

var codeErr = map[string]error{
	CodeBadRequest:   ErrBadRequest,
	CodeNotFound:     ErrNotFound,
	CodeRefused:      ErrRefusedRecipient,
	CodeNotRotatable: ErrNotRotatable,
	CodeOperator:     ErrOperatorValue,
	CodeNotDelivered: ErrNotDelivered,
	CodeConflict:     ErrConflict,
	CodeForbidden:    ErrForbidden,
	CodeInternal:     ErrInternal,
}

// CodeOf returns the [ErrorBody.Code] for err (one of the sentinels above,
// or CodeInternal).
func CodeOf(err error) string {
	for code, s := range codeErr {
		if errors.Is(err, s) {
			return code
		}
	}
	return CodeInternal
}

// Error is a request vaultd refused. errors.Is(err, ErrNotFound) and so on
// work on it.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is one of the Code* constants.
	Code string
	// Message is vaultd's error text; it never carries a value.
	Message string
	// Hint says what would fix it, when vaultd knows.
	HintText string
}

// Error returns "vaultd: " and the message.
func (e *Error) Error() string { return fmt.Sprintf("vaultd: %s", e.Message) }

// Hint says what would fix the error (printed by meshgen after the error).
func (e *Error) Hint() string { return e.HintText }

// Unwrap returns the sentinel error for Code.
func (e *Error) Unwrap() error {
	if s, ok := codeErr[e.Code]; ok {
		return s
	}
	return ErrInternal
}
