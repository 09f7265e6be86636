// A Kubernetes API endpoint on loopback for tests/integration/k8s_manifests.sh:
// kube-apiserver is not in Debian, so this stands in for it, serving what
// kubectl reads while it validates and applies manifests.
//
//   - /openapi/v2: the real Kubernetes API schema (api/openapi-spec/swagger.json
//     of Debian's kubernetes source package, the release kubernetes-client
//     is built from) through kube-openapi's own handler (Debian's
//     golang-k8s-kube-openapi-dev), the code kube-apiserver serves it with:
//     the same JSON-to-protobuf conversion and content negotiation, so
//     kubectl's --validate sees what a real server of that release sends.
//   - discovery (/api, /apis, /api/v1, /apis/GROUP/VERSION, /version):
//     derived from that schema's paths and their x-kubernetes-action and
//     x-kubernetes-group-version-kind, in the documented wire format
//     (APIVersions, APIGroupList, APIResourceList); no short names (cm,
//     ds: the schema does not carry them).
//   - objects: create (POST to a collection) and get, kept in memory, with
//     the answers a real server gives (201 with the object, 404 NotFound,
//     409 AlreadyExists, 404 for a namespace that does not exist, 400 for a
//     body that names another namespace or kind) as metav1.Status. No other
//     verb: 405. It runs no controllers and no server-side validation:
//     the tests check the client's schema validation and what it sends.
//
// Built with Debian's Go in GOPATH mode against /usr/share/gocode.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

type resource struct {
	Name       string   `json:"name"`
	Singular   string   `json:"singularName"`
	Namespaced bool     `json:"namespaced"`
	Kind       string   `json:"kind"`
	Verbs      []string `json:"verbs"`
}

type groupVersion struct {
	group, version string
	resources      map[string]*resource
}

func (gv *groupVersion) String() string {
	if gv.group == "" {
		return gv.version
	}
	return gv.group + "/" + gv.version
}

var actionVerb = map[string]string{
	"get": "get", "list": "list", "post": "create", "put": "update",
	"patch": "patch", "delete": "delete", "deletecollection": "deletecollection",
	"watch": "watch", "watchlist": "watch",
}

// discovery from the schema's paths: /api/v1/... and /apis/G/V/...,
// namespaced when any of its paths is under namespaces/{namespace}/,
// skipping watch/ paths, subresources and actions other than the verbs
// above.
func discover(raw []byte) (map[string]*groupVersion, error) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	gvs := map[string]*groupVersion{}
	for path, ops := range doc.Paths {
		seg := strings.Split(strings.Trim(path, "/"), "/")
		var group, version string
		var rest []string
		switch {
		case len(seg) >= 3 && seg[0] == "api":
			version, rest = seg[1], seg[2:]
		case len(seg) >= 4 && seg[0] == "apis":
			group, version, rest = seg[1], seg[2], seg[3:]
		default:
			continue
		}
		if len(rest) > 0 && rest[0] == "watch" {
			continue
		}
		namespaced := false
		if len(rest) >= 3 && rest[0] == "namespaces" && rest[1] == "{namespace}" {
			namespaced, rest = true, rest[2:]
		}
		// a collection (NAME) or an object (NAME/{name}); deeper is a
		// subresource
		if len(rest) == 0 || len(rest) > 2 || (len(rest) == 2 && rest[1] != "{name}") {
			continue
		}
		name := rest[0]
		for _, op := range ops {
			var o struct {
				Action string `json:"x-kubernetes-action"`
				GVK    *struct {
					Group, Version, Kind string
				} `json:"x-kubernetes-group-version-kind"`
			}
			if json.Unmarshal(op, &o) != nil || o.GVK == nil {
				continue
			}
			verb, ok := actionVerb[o.Action]
			if !ok {
				continue
			}
			key := group + "/" + version
			gv := gvs[key]
			if gv == nil {
				gv = &groupVersion{group, version, map[string]*resource{}}
				gvs[key] = gv
			}
			r := gv.resources[name]
			if r == nil {
				r = &resource{Name: name, Kind: o.GVK.Kind}
				gv.resources[name] = r
			}
			// a namespaced resource also has cluster-wide list and
			// watch paths (/api/v1/configmaps): any path under
			// namespaces/{namespace}/ makes it namespaced
			r.Namespaced = r.Namespaced || namespaced
			if !contains(r.Verbs, verb) {
				r.Verbs = append(r.Verbs, verb)
				sort.Strings(r.Verbs)
			}
		}
	}
	return gvs, nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

type server struct {
	gvs   map[string]*groupVersion
	mu    sync.Mutex
	objs  map[string]map[string]interface{} // object path -> object
	seq   int
	start time.Time
}

func writeJSON(w http.ResponseWriter, code int, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// a metav1.Status, as the API answers every failure
func status(w http.ResponseWriter, code int, reason, msg string, details map[string]string) {
	st := map[string]interface{}{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]string{},
		"status": "Failure", "message": msg, "reason": reason, "code": code,
	}
	if details != nil {
		st["details"] = details
	}
	writeJSON(w, code, st)
}

func (s *server) discovery(w http.ResponseWriter, r *http.Request) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case p == "/version":
		writeJSON(w, 200, map[string]string{"major": "1", "minor": "20",
			"gitVersion": "v1.20.2", "platform": "linux/amd64"})
	case p == "/api":
		writeJSON(w, 200, map[string]interface{}{"kind": "APIVersions",
			"versions": []string{"v1"},
			"serverAddressByClientCIDRs": []map[string]string{
				{"clientCIDR": "0.0.0.0/0", "serverAddress": r.Host}}})
	case p == "/apis":
		byGroup := map[string][]string{}
		for _, gv := range s.gvs {
			if gv.group != "" {
				byGroup[gv.group] = append(byGroup[gv.group], gv.version)
			}
		}
		var groups []interface{}
		names := make([]string, 0, len(byGroup))
		for g := range byGroup {
			names = append(names, g)
		}
		sort.Strings(names)
		for _, g := range names {
			vs := byGroup[g]
			sort.Slice(vs, func(i, j int) bool { return versionLess(vs[j], vs[i]) })
			var versions []map[string]string
			for _, v := range vs {
				versions = append(versions, map[string]string{
					"groupVersion": g + "/" + v, "version": v})
			}
			groups = append(groups, map[string]interface{}{"name": g,
				"versions": versions, "preferredVersion": versions[0]})
		}
		writeJSON(w, 200, map[string]interface{}{"kind": "APIGroupList",
			"apiVersion": "v1", "groups": groups})
	default:
		seg := strings.Split(strings.Trim(p, "/"), "/")
		var key string
		if len(seg) == 2 && seg[0] == "api" {
			key = "/" + seg[1]
		} else if len(seg) == 3 && seg[0] == "apis" {
			key = seg[1] + "/" + seg[2]
		} else {
			return false
		}
		gv := s.gvs[key]
		if gv == nil {
			status(w, 404, "NotFound", "the server could not find the requested resource", nil)
			return true
		}
		var list []*resource
		for _, res := range gv.resources {
			list = append(list, res)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
		writeJSON(w, 200, map[string]interface{}{"kind": "APIResourceList",
			"apiVersion": "v1", "groupVersion": gv.String(), "resources": list})
	}
	return true
}

// v1 > v1beta2 > v1beta1 > v1alpha1: the preferred version comes first
func versionLess(a, b string) bool {
	rank := func(v string) (int, string) {
		switch {
		case strings.Contains(v, "alpha"):
			return 0, v
		case strings.Contains(v, "beta"):
			return 1, v
		}
		return 2, v
	}
	ra, va := rank(a)
	rb, vb := rank(b)
	if ra != rb {
		return ra < rb
	}
	return va < vb
}

func (s *server) objects(w http.ResponseWriter, r *http.Request) {
	seg := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var key string
	var rest []string
	switch {
	case len(seg) >= 3 && seg[0] == "api":
		key, rest = "/"+seg[1], seg[2:]
	case len(seg) >= 4 && seg[0] == "apis":
		key, rest = seg[1]+"/"+seg[2], seg[3:]
	default:
		status(w, 404, "NotFound", "the server could not find the requested resource", nil)
		return
	}
	gv := s.gvs[key]
	ns, name := "", ""
	if len(rest) >= 3 && rest[0] == "namespaces" {
		ns, rest = rest[1], rest[2:]
	}
	if gv == nil || len(rest) == 0 || len(rest) > 2 {
		status(w, 404, "NotFound", "the server could not find the requested resource", nil)
		return
	}
	res := gv.resources[rest[0]]
	if res == nil || res.Namespaced != (ns != "") {
		status(w, 404, "NotFound", "the server could not find the requested resource", nil)
		return
	}
	if len(rest) == 2 {
		name = rest[1]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.Method == "GET" && name != "":
		if o, ok := s.objs[r.URL.Path]; ok {
			writeJSON(w, 200, o)
			return
		}
		status(w, 404, "NotFound", fmt.Sprintf("%s %q not found", res.Name, name),
			map[string]string{"name": name, "kind": res.Name})
	case r.Method == "POST" && name == "":
		s.create(w, r, gv, res, ns)
	default:
		status(w, 405, "MethodNotAllowed", "this test server only creates and gets objects", nil)
	}
}

func (s *server) create(w http.ResponseWriter, r *http.Request, gv *groupVersion, res *resource, ns string) {
	if r.URL.Query().Get("dryRun") != "" {
		status(w, 400, "BadRequest", "server-side dry run is not served here", nil)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var o map[string]interface{}
	if err == nil {
		err = json.Unmarshal(body, &o)
	}
	if err != nil {
		status(w, 400, "BadRequest", "the body is not a JSON object: "+fmt.Sprint(err), nil)
		return
	}
	if o["kind"] != res.Kind || o["apiVersion"] != gv.String() {
		status(w, 400, "BadRequest", fmt.Sprintf("the object is %v %v, not %s %s",
			o["apiVersion"], o["kind"], gv.String(), res.Kind), nil)
		return
	}
	meta, _ := o["metadata"].(map[string]interface{})
	name, _ := meta["name"].(string)
	if name == "" {
		status(w, 422, "Invalid", res.Kind+" is invalid: metadata.name: Required value", nil)
		return
	}
	if ons, _ := meta["namespace"].(string); ons != "" && ons != ns {
		status(w, 400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request", nil)
		return
	}
	if ns != "" {
		if _, ok := s.objs["/api/v1/namespaces/"+ns]; !ok {
			status(w, 404, "NotFound", fmt.Sprintf("namespaces %q not found", ns),
				map[string]string{"name": ns, "kind": "namespaces"})
			return
		}
		meta["namespace"] = ns
	}
	path := strings.TrimSuffix(r.URL.Path, "/") + "/" + name
	if _, ok := s.objs[path]; ok {
		status(w, 409, "AlreadyExists", fmt.Sprintf("%s %q already exists", res.Name, name),
			map[string]string{"name": name, "kind": res.Name})
		return
	}
	s.seq++
	meta["uid"] = fmt.Sprintf("00000000-0000-4000-8000-%012d", s.seq)
	meta["resourceVersion"] = fmt.Sprint(s.seq)
	meta["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	s.objs[path] = o
	log.Printf("created %s", path)
	writeJSON(w, 201, o)
}

func main() {
	specPath := flag.String("spec", "", "the Kubernetes OpenAPI v2 document (swagger.json)")
	addr := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	portFile := flag.String("port-file", "", "write the port here once listening")
	flag.Parse()
	raw, err := os.ReadFile(*specPath)
	if err != nil {
		log.Fatal(err)
	}
	var sw spec.Swagger
	if err := json.Unmarshal(raw, &sw); err != nil {
		log.Fatalf("%s: %v", *specPath, err)
	}
	gvs, err := discover(raw)
	if err != nil || len(gvs) == 0 {
		log.Fatalf("%s: no API groups in its paths (%v)", *specPath, err)
	}
	s := &server{gvs: gvs, objs: map[string]map[string]interface{}{}, start: time.Now()}
	mux := http.NewServeMux()
	oa, err := handler.NewOpenAPIService(&sw)
	if err != nil {
		log.Fatalf("openapi: %v", err)
	}
	if err := oa.RegisterOpenAPIVersionedService("/openapi/v2", mux); err != nil {
		log.Fatal(err)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" && s.discovery(w, r) {
			return
		}
		s.objects(w, r)
	})
	host, _, _ := net.SplitHostPort(*addr)
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		log.Fatalf("%s: loopback addresses only", *addr)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *portFile != "" {
		port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
		tmp := *portFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(port+"\n"), 0644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(tmp, *portFile); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("serving %d groups on %s", len(gvs), ln.Addr())
	// every request in the log, with the media type asked for: the test
	// checks that kubectl read the schema (as protobuf) before it judged
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Printf("%s %s accept=%q", r.Method, r.URL.RequestURI(), r.Header.Get("Accept"))
		mux.ServeHTTP(w, r)
	})
	log.Fatal(http.Serve(ln, logged))
}
