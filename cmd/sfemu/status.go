package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/searchfabric/sfemu/emulator/httpapi"
)

// `sfemu status` prints the status page's tables in the terminal (SR13),
// from the same GET /v1/status the page polls.

func newStatusCmd() *cobra.Command {
	var addr, token string
	var watch bool
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "print a running sfemu's status (collections, adapter, partitions, DDLs, errors) in the terminal",
		Long: `status reads GET /v1/status of a running "sfemu run" (the JSON the status
page at http://<addr>/ polls) and prints its tables: the upstream, the
adapter's state with its progress (catch-up after a restart), per
collection documents, generation (and rebuild progress), safe_ts lag and
applied_ts lag per modality, per source partition epoch, last seq and lag,
the last DDLs with their policy, and the last errors. --watch repeats it
every --interval until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runStatus(ctx, cmd.OutOrStdout(), addr, token, watch, every)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "http", "127.0.0.1:8080", "HTTP address of the running sfemu")
	f.StringVar(&token, "token", "", "bearer token, when sfemu run has one")
	f.BoolVar(&watch, "watch", false, "repeat until interrupted, redrawing the screen")
	f.DurationVar(&every, "interval", 2*time.Second, "time between redraws with --watch")
	return cmd
}

func runStatus(ctx context.Context, out io.Writer, addr, token string, watch bool, every time.Duration) error {
	if every <= 0 {
		return fmt.Errorf("--interval %v: must be positive", every)
	}
	for {
		doc, err := fetchStatus(ctx, addr, token)
		if err != nil {
			if watch && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if watch {
			fmt.Fprint(out, "\033[H\033[2J") // home and clear: redraw in place
		}
		renderStatus(out, doc)
		if !watch {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

func fetchStatus(ctx context.Context, addr, token string) (*httpapi.StatusDoc, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, strings.TrimSuffix(addr, "/")+"/v1/status", nil)
	if err != nil {
		return nil, fmt.Errorf("--http %s: %w", addr, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the status of sfemu at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the status of sfemu at %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status of sfemu at %s: %s: %s", addr, resp.Status, strings.TrimSpace(string(raw)))
	}
	var doc httpapi.StatusDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("status of sfemu at %s: %w", addr, err)
	}
	return &doc, nil
}

// renderStatus prints the page's tables.
func renderStatus(out io.Writer, doc *httpapi.StatusDoc) {
	up := "upstream not reported"
	if u := doc.Upstream; u != nil {
		up = fmt.Sprintf("upstream %s %s current_ts=%d", u.Mode, u.Address, u.CurrentTs)
	}
	fmt.Fprintf(out, "sfemu status at %s · %s\n", doc.Now.Local().Format("15:04:05"), up)
	if a := doc.Adapter; a != nil {
		fmt.Fprintf(out, "adapter %s", a.State)
		if a.Reason != "" {
			fmt.Fprintf(out, " (%s)", a.Reason)
		}
		fmt.Fprintf(out, " epoch=%d rows=%d ddls=%d buffered=%d restarts=%d checkpoint_lag=%s\n",
			a.Epoch, a.Rows, a.DDLs, a.Buffered, a.Restarts, fmtLag(a.CheckpointLag))
		if a.Progress != nil {
			fmt.Fprintf(out, "  %s\n", a.Progress.Line())
		}
	}
	if n := len(doc.Series.Points); n > 0 {
		p := doc.Series.Points[n-1]
		fmt.Fprintf(out, "ingest %.0f rows/s\n", p.RowsPerSec)
	}

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCOLLECTION\tDOCS\tTOMBSTONES\tGEN\tSCHEMA\tSAFE_TS\tSAFE_LAG\tAPPLIED LAG")
	for _, c := range doc.Collections {
		var applied []string
		for _, m := range c.Applied {
			applied = append(applied, m.Modality+"="+fmtLag(m.Lag))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", c.Name, c.Documents, c.Tombstones, c.Generation, c.SchemaVersion, c.SafeTs, fmtLag(c.SafeLag), strings.Join(applied, " "))
	}
	_ = tw.Flush()
	for _, c := range doc.Collections {
		if c.Rebuild != nil {
			fmt.Fprintf(out, "  %s: %s\n", c.Name, c.Rebuild.Line())
		}
	}

	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nPARTITION\tCOLLECTION\tEPOCH\tLAST_SEQ\tRESOLVED_TS\tLAG")
	for _, p := range doc.Partitions {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", p.SourcePartition, p.Collection, p.Epoch, p.LastSeq, p.ResolvedTs, fmtLag(p.Lag))
	}
	_ = tw.Flush()

	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nDDL_TS\tCOLLECTION\tPOLICY\tSCHEMA\tSTATEMENT")
	for _, d := range doc.DDLs {
		coll := d.Collection
		if coll == "" {
			coll = d.Table
		}
		schema := "-"
		if d.SchemaVersion > 0 {
			schema = fmt.Sprint(d.SchemaVersion)
		}
		policy := strings.TrimPrefix(d.Policy, "SCHEMA_UPDATE_POLICY_")
		if policy == "" {
			policy = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", d.Ts, coll, policy, schema, d.Query)
	}
	_ = tw.Flush()

	fmt.Fprintln(out, "\nERRORS")
	if len(doc.Errors) == 0 {
		fmt.Fprintln(out, "none")
	}
	for _, e := range doc.Errors {
		fmt.Fprintf(out, "%s %s\n", e.At.Local().Format("15:04:05"), e.Message)
	}
}

func fmtLag(l *float64) string {
	if l == nil {
		return "-"
	}
	return (time.Duration(*l * float64(time.Second))).Round(time.Millisecond).String()
}
