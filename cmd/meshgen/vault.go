package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(issue): replaced by the real command.
func newVaultCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "vault",
		Short: "not built yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("vault is not built yet")
		},
	}
}
