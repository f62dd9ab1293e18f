package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// Options configure Handler; the zero value (or nil) is the defaults.
type Options struct {
	// MaxList is the most rows one /ls answers, and its default limit;
	// 0 means 1000.
	MaxList int
}

// Handler returns the admin handler of db (see the package comment). It
// serves paths relative to where it is mounted: strip the mount prefix
// (http.StripPrefix) when it is not the root.
func Handler(db *store.DB, o *Options) http.Handler {
	h := &handler{db: db, maxList: 1000}
	if o != nil && o.MaxList > 0 {
		h.maxList = o.MaxList
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", h.stats)
	mux.HandleFunc("GET /ls", h.ls)
	mux.HandleFunc("GET /contexts", h.contexts)
	mux.HandleFunc("GET /inspect/{id}", h.inspect)
	mux.HandleFunc("GET /verify", h.verify)
	mux.HandleFunc("POST /verify", h.verify)
	mux.HandleFunc("GET /check", h.check)
	mux.HandleFunc("POST /check", h.check)
	return mux
}

type handler struct {
	db      *store.DB
	maxList int
}

// errBadRequest marks a request error (status 400).
var errBadRequest = errors.New("bad request")

// reply writes v as JSON, or err as {"error": ...} with a status that
// follows the error's sentinel.
func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, errBadRequest), errors.Is(err, store.ErrInvalidArgument):
			status = http.StatusBadRequest
		case errors.Is(err, store.ErrNotFound):
			status = http.StatusNotFound
		case errors.Is(err, store.ErrClosed):
			status = http.StatusServiceUnavailable
		}
		w.WriteHeader(status)
		v = map[string]string{"error": err.Error()}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (h *handler) stats(w http.ResponseWriter, r *http.Request) {
	s, err := StatsOf(h.db)
	reply(w, s, err)
}

// listOptions reads ns, model, after and limit (at most, and by default,
// maxList).
func (h *handler) listOptions(r *http.Request) (ListOptions, error) {
	q := r.URL.Query()
	o := ListOptions{Namespace: q.Get("ns"), Model: q.Get("model"), After: q.Get("after"), Limit: h.maxList}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return o, fmt.Errorf("%w: limit %q: want a count >= 0", errBadRequest, s)
		}
		if n > 0 && n < h.maxList {
			o.Limit = n
		}
	}
	return o, nil
}

func (h *handler) ls(w http.ResponseWriter, r *http.Request) {
	o, err := h.listOptions(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	l, err := ListOf(h.db, o)
	reply(w, l, err)
}

func (h *handler) contexts(w http.ResponseWriter, r *http.Request) {
	o, err := h.listOptions(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	l, err := ContextsOf(h.db, o)
	reply(w, l, err)
}

func (h *handler) inspect(w http.ResponseWriter, r *http.Request) {
	id, ns := strings.ToLower(r.PathValue("id")), r.URL.Query().Get("ns")
	if len(id) < 4 || len(id) > 64 || strings.Trim(id, "0123456789abcdef") != "" {
		reply(w, nil, fmt.Errorf("%w: id %q: want 4 to 64 hex digits", errBadRequest, id))
		return
	}
	var found []*format.PacketHeader
	var elsewhere []string // namespaces outside ns holding the id
	err := h.db.Headers(func(p *format.PacketHeader) error {
		switch {
		case !strings.HasPrefix(p.ID.String(), id):
		case ns == "" || p.Namespace == ns:
			found = append(found, p)
		case !slices.Contains(elsewhere, strconv.Quote(p.Namespace)):
			elsewhere = append(elsewhere, strconv.Quote(p.Namespace))
		}
		return nil
	})
	switch {
	case err != nil:
	case len(found) == 0 && ns == "":
		err = fmt.Errorf("%w: no packet %s", store.ErrNotFound, id)
	case len(found) == 0 && len(elsewhere) == 0:
		err = fmt.Errorf("%w: no packet %s in namespace %q, nor in any other", store.ErrNotFound, id, ns)
	case len(found) == 0:
		slices.Sort(elsewhere)
		err = fmt.Errorf("%w: no packet %s in namespace %q (ns); it is in namespace %s", store.ErrNotFound, id, ns, strings.Join(elsewhere, ", "))
	case len(found) > 1:
		err = fmt.Errorf("%w: packet id %s is ambiguous: %d packets match (give more digits or ns)", errBadRequest, id, len(found))
	}
	if err != nil {
		reply(w, nil, err)
		return
	}
	reply(w, PacketOf(h.db, "", found[0]), nil)
}

func (h *handler) verify(w http.ResponseWriter, r *http.Request) {
	o := &store.VerifyOptions{}
	if s := r.URL.Query().Get("max_findings"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			reply(w, nil, fmt.Errorf("%w: max_findings %q: want a count >= 0", errBadRequest, s))
			return
		}
		o.MaxFindings = n
	}
	rep, err := h.db.Verify(r.Context(), *o)
	if err != nil {
		reply(w, nil, err)
		return
	}
	reply(w, VerifyOf(rep), nil)
}

func (h *handler) check(w http.ResponseWriter, r *http.Request) {
	rep, err := h.db.Check(r.Context(), store.CheckOptions{})
	if err != nil {
		reply(w, nil, err)
		return
	}
	reply(w, CheckOf(rep), nil)
}
