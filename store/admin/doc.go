// Package admin serves a live store's state as JSON over HTTP, for the
// kvstore CLI's --addr and for operators: what "kvstore stat", "ls" (and
// "ls --contexts"), "inspect", "verify" and "check" print with --json, read from the running
// process instead of the directory (which the process holds locked).
//
// Like net/http/pprof it is off unless the server mounts it; unlike pprof
// it registers nothing by itself:
//
//	mux.Handle("/debug/kvstore/", http.StripPrefix("/debug/kvstore", admin.Handler(db, nil)))
//
// Endpoints (GET; verify and check also POST), each answering one JSON
// document, or {"error": "..."} with a 4xx/5xx status:
//
//	/stats              Stats: totals, per namespace and model, per blob file
//	/ls?ns=&model=&limit=&after=
//	                    List: packets in catalog order; ns filters by
//	                    namespace, model by fingerprint hex prefix; at most
//	                    limit rows (default and cap Options.MaxList), after
//	                    the cursor "after" (List.Next of the page before:
//	                    NAMESPACE/ID, each path-escaped)
//	/contexts?ns=&model=&limit=&after=
//	                    ContextList: span memory contexts in catalog order
//	                    (namespace, then name), filtered and paged as /ls
//	                    (cursor NAMESPACE/NAME)
//	/inspect/{id}?ns=   Packet: one packet by a unique hex id prefix (4 to
//	                    64 digits)
//	/verify?max_findings=
//	                    Verify: store.Verify over every extent
//	/check              Check: store.Check (catalog against blob files)
//
// verify and check read the whole store; they stop when the request's
// context is cancelled (the client went away). The handler only reads.
// It has no authentication: mount it on an address only operators reach.
package admin
