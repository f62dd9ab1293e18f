package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/store/admin"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "verify", summary: "check every chunk's CRC32C and every extent trailer", long: verifySummary, setup: setupVerify})
}

const verifySummary = `Reads every catalogued extent (packets and span memories) and checks
each chunk's CRC32C and each extent's trailer (store.Verify). Every bad
chunk is reported with its blob file and offset, packet, layer and K|V.
Exits 1 when anything is found. With --tier it checks the shared tier
instead: every packet the tier holds for --ns and --model is fetched and
each part's CRC32C and the header checked, keeping nothing (kvstore tier
verify; the tier is named by --endpoint, --bucket, --prefix or their
KVSTORE_TIER_* variables).`

// verifyOutput is verify's output: the admin handler's /verify.
type verifyOutput admin.Verify

func setupVerify(fs *pflag.FlagSet, e *env) verbFunc {
	max := fs.Int("max-findings", 0, "stop after so many findings (0: no limit)")
	addrFlag(fs, e)
	onTier := fs.Bool("tier", false, "verify the shared tier's packets of --ns and --model instead of the local store")
	viaTier := tierVerb(runTierVerify)(fs, e)
	return func(ctx context.Context, e *env, args []string) error {
		if *onTier {
			return viaTier(ctx, e, args)
		}
		return runVerify(ctx, e, args, *max)
	}
}

func runVerify(ctx context.Context, e *env, args []string, max int) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if max < 0 {
		return fmt.Errorf("%w: --max-findings %d is negative", errUsage, max)
	}
	q := url.Values{"max_findings": {strconv.Itoa(max)}}
	out, err := report(ctx, e, "/verify", q, func(db *store.DB) (*verifyOutput, error) {
		p := newProgress(e, "verify")
		rep, err := db.Verify(ctx, store.VerifyOptions{MaxFindings: max,
			Progress: func(done, total int64) { p.update(done, total, true) }})
		p.done()
		if err != nil {
			return nil, err
		}
		return (*verifyOutput)(admin.VerifyOf(rep)), nil
	})
	if err != nil {
		return err
	}
	return outputFindings(e, out, out.text, len(out.Findings))
}

func (o *verifyOutput) text(w io.Writer) error {
	for _, f := range o.Findings {
		fmt.Fprintln(w, f.Text)
	}
	status := "ok"
	if len(o.Findings) > 0 {
		status = fmt.Sprintf("%d findings", len(o.Findings))
		if o.Truncated {
			status += " (stopped at --max-findings)"
		}
	}
	fmt.Fprintf(w, "verified %d extents, %d chunks, %d bytes: %s\n", o.Extents, o.Chunks, o.Bytes, status)
	return nil
}
