package main

import (
	"context"
	"fmt"
	"io"

	"github.com/kvstore/kvstore/format"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "rm", summary: "delete packets", args: "<packet-id>...", long: rmSummary, setup: setupRm})
}

const rmSummary = `Deletes the packets named by id (a unique hex prefix of at least 4
digits will do). Every id is resolved before anything is deleted, so an
unknown or ambiguous id deletes nothing. Their bytes become dead space
that compact reclaims.`

func setupRm(fs *pflag.FlagSet, e *env) verbFunc {
	ns := fs.String("ns", "", "look the ids up in this namespace only")
	return func(ctx context.Context, e *env, args []string) error { return runRm(e, args, *ns) }
}

func runRm(e *env, args []string, ns string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no packet id given", errUsage)
	}
	if err := checkIDs(args...); err != nil {
		return err
	}
	db, err := openExisting(e)
	if err != nil {
		return err
	}
	defer db.Close()
	var hs []*format.PacketHeader
	seen := map[string]bool{}
	for _, arg := range args {
		h, err := findPacket(db, arg, ns)
		if err != nil {
			return err
		}
		if k := h.Namespace + "\x00" + h.ID.String(); !seen[k] {
			seen[k] = true
			hs = append(hs, h)
		}
	}
	removed := []string{}
	for _, h := range hs {
		if err := db.Delete(context.Background(), h.Namespace, h.Model, h.ID); err != nil {
			return err
		}
		removed = append(removed, h.ID.String())
	}
	return output(e, map[string][]string{"removed": removed}, func(w io.Writer) error {
		for _, id := range removed {
			fmt.Fprintf(w, "removed %s\n", id)
		}
		return nil
	})
}
