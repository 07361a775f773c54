package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/service"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// The Dockerfile rules that matter, checked without a Docker engine.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if len(froms) < 2 {
		t.Fatalf("%d FROM lines: want a multi-stage build", len(froms))
	}
	for _, f := range froms {
		img := f[1]
		if strings.Contains(img, "${GO_VERSION}") {
			if !regexp.MustCompile(`(?m)^ARG GO_VERSION=\d+\.\d+\.\d+$`).MatchString(df) {
				t.Errorf("base %s: GO_VERSION must default to an exact version", img)
			}
			continue
		}
		if !strings.Contains(img, ":") || strings.HasSuffix(img, ":latest") {
			t.Errorf("base image %s is not pinned to a version", img)
		}
	}
	final := df[strings.LastIndex(df, "\nFROM"):]
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindStringSubmatch(final)
	if user == nil || strings.HasPrefix(user[1], "root") || strings.HasPrefix(user[1], "0") {
		t.Errorf("the final stage must run as a non-root USER, got %v", user)
	}
	for _, rule := range []struct{ re, why string }{
		{`CGO_ENABLED=0`, "static binaries"},
		{`ARG VERSION`, "a build arg for the version"},
		{`\./cmd/consumer`, "the consumer binary"},
		{`\./cmd/producer`, "the producer binary"},
		{`distroless|scratch`, "a minimal base"},
	} {
		if !regexp.MustCompile(rule.re).MatchString(df) {
			t.Errorf("Dockerfile lacks %s (%s)", rule.why, rule.re)
		}
	}
	for _, bad := range []string{`(?i)(ENV|ARG)\s+\S*(PASSWORD|SECRET|TOKEN|API_KEY)`, `(?i)\.pem|id_rsa|\.key\b`, `(?m)^ADD\s+http`} {
		if regexp.MustCompile(bad).MatchString(df) {
			t.Errorf("Dockerfile matches %s: secrets or remote downloads do not belong in an image", bad)
		}
	}
}

// helm returns the helm binary, or skips outside CI (CI installs it: .ci/run).
func helm(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	out, _ := exec.Command("go", "env", "GOPATH").Output()
	if p := filepath.Join(strings.TrimSpace(string(out)), "bin", "helm"); fileExists(p) {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("helm not found: .ci/run installs it with go install helm.sh/helm/v3/cmd/helm@v3.16.4")
	}
	t.Skip("helm not found; install it with: go install helm.sh/helm/v3/cmd/helm@v3.16.4")
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// dataValues are the values the chart requires (they depend on the data).
var dataValues = []string{"config.DRIFTSTREAM_BROKERS=kafka:9092", "config.DRIFTSTREAM_DIM=10"}

// render runs helm template with the data values and extra --set values.
func render(t *testing.T, sets ...string) []byte {
	t.Helper()
	args := []string{"template", "rel", filepath.Join("..", "helm", "driftstream")}
	for _, s := range append(dataValues, sets...) {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helm(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", sets, err, stderr.String())
	}
	return out
}

// decodeStrict decodes every manifest into its API type, rejecting unknown fields.
func decodeStrict(t *testing.T, manifests []byte) map[string]any {
	t.Helper()
	objs := map[string]any{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(manifests), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) == "" {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("not YAML: %v\n%s", err, doc)
		}
		var head struct{ APIVersion, Kind string }
		json.Unmarshal(js, &head)
		var obj any
		switch head.APIVersion + "/" + head.Kind {
		case "apps/v1/Deployment":
			obj = &appsv1.Deployment{}
		case "apps/v1/StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "v1/ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1/Service":
			obj = &corev1.Service{}
		case "v1/ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "networking.k8s.io/v1/NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		case "policy/v1/PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		case "monitoring.coreos.com/v1/ServiceMonitor":
			obj = &monitoringv1.ServiceMonitor{}
		case "monitoring.coreos.com/v1/PrometheusRule":
			obj = &monitoringv1.PrometheusRule{}
		default:
			t.Fatalf("no API type for %s %s: add it to the test", head.APIVersion, head.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			t.Fatalf("%s does not decode strictly: %v\n%s", head.Kind, err, doc)
		}
		kind := head.Kind
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Labels["grafana_dashboard"] != "" {
			kind = "Dashboard" // the dashboard's ConfigMap, beside the configuration's
		}
		objs[kind] = obj
	}
	return objs
}

func TestHelmChartRendersValidManifests(t *testing.T) {
	tests := []struct {
		name  string
		sets  []string
		kinds []string
	}{
		{"defaults", nil, []string{"Deployment", "ConfigMap", "Service", "ServiceAccount", "PodDisruptionBudget"}},
		{"everything on", []string{"metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true", "grafanaDashboard.enabled=true",
			"sasl.mechanism=scram-sha-512", "sasl.username=svc", "sasl.passwordSecret.name=kafka-pass",
			"tls.enabled=true", "tls.secretName=kafka-tls", "tls.mutual=true", "api.adminTokenSecret.name=driftstream-admin",
			"networkPolicy.enabled=true", "networkPolicy.from[0].namespaceSelector.matchLabels.team=monitoring"},
			[]string{"Deployment", "ConfigMap", "Service", "ServiceAccount", "PodDisruptionBudget", "ServiceMonitor", "PrometheusRule", "Dashboard", "NetworkPolicy"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := decodeStrict(t, render(t, tc.sets...))
			for _, k := range tc.kinds {
				if objs[k] == nil {
					t.Errorf("no %s rendered", k)
				}
			}
			if len(objs) != len(tc.kinds) {
				t.Errorf("rendered %d kinds, want %d", len(objs), len(tc.kinds))
			}
			d := objs["Deployment"].(*appsv1.Deployment)
			c := d.Spec.Template.Spec.Containers[0]
			sc, psc := c.SecurityContext, d.Spec.Template.Spec.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Error("pods must run as non-root without privilege escalation")
			}
			if c.LivenessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.Resources.Requests.Cpu().IsZero() {
				t.Error("probes and resource requests are required")
			}
			cm := objs["ConfigMap"].(*corev1.ConfigMap)
			for k, v := range cm.Data {
				if strings.Contains(strings.ToUpper(k), "TOKEN") || strings.Contains(strings.ToUpper(k), "PASSWORD") && k != "DRIFTSTREAM_SASL_PASSWORD_FILE" {
					t.Errorf("secret %s=%s in a ConfigMap", k, v)
				}
			}
			if tc.name == "everything on" {
				np := objs["NetworkPolicy"].(*networkingv1.NetworkPolicy)
				if in := np.Spec.Ingress; len(in) != 1 || len(in[0].Ports) != 1 || in[0].Ports[0].Port.IntValue() != 9090 ||
					len(in[0].From) != 1 || in[0].From[0].NamespaceSelector.MatchLabels["team"] != "monitoring" || np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] == "" {
					t.Errorf("the network policy does not admit exactly the given sources to the metrics port: %+v", np.Spec)
				}
				if cm.Data["DRIFTSTREAM_SASL_PASSWORD_FILE"] == "" || cm.Data["DRIFTSTREAM_TLS_CERT_FILE"] == "" {
					t.Errorf("security settings missing from the ConfigMap: %v", cm.Data)
				}
				if len(c.Env) != 3 || c.Env[0].Name != "DRIFTSTREAM_ADMIN_TOKEN" || c.Env[0].ValueFrom.SecretKeyRef.Name != "driftstream-admin" {
					t.Errorf("the admin token is not taken from its Secret: %+v", c.Env)
				}
				vols := fmt.Sprint(d.Spec.Template.Spec.Volumes)
				if !strings.Contains(vols, "kafka-pass") || !strings.Contains(vols, "kafka-tls") {
					t.Errorf("secret volumes missing: %s", vols)
				}
				rules := objs["PrometheusRule"].(*monitoringv1.PrometheusRule).Spec.Groups[0].Rules
				names := fmt.Sprint(rules)
				for _, a := range []string{"DriftstreamDown", "DriftstreamMemberDown", "DriftstreamRestarting", "DriftstreamNotReady", "DriftstreamConsumerLag", "DriftstreamDeadLetters", "DriftstreamAccuracyDrop", "DriftstreamPartitionFailed", "DriftstreamDrift"} {
					if !strings.Contains(names, a) {
						t.Errorf("alert %s missing", a)
					}
				}
			}
		})
	}
	// Required values fail rendering with a clear message.
	for _, tc := range []struct {
		sets []string
		says string
	}{
		{append(slices.Clone(dataValues), "sasl.mechanism=plain"), "sasl.username is required"},
		{[]string{"config.DRIFTSTREAM_DIM=10"}, "config.DRIFTSTREAM_BROKERS is required"},
		{[]string{"config.DRIFTSTREAM_BROKERS=k:9092"}, "config.DRIFTSTREAM_DIM (the length of your events"},
		{append(slices.Clone(dataValues), "networkPolicy.enabled=true"), "networkPolicy.from is required"},
	} {
		args := []string{"template", "rel", filepath.Join("..", "helm", "driftstream")}
		for _, s := range tc.sets {
			args = append(args, "--set", s)
		}
		out, err := exec.Command(helm(t), args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.says) {
			t.Fatalf("%v was accepted, or refused without saying %q: %s", tc.sets, tc.says, out)
		}
	}
	if out := render(t, "config.DRIFTSTREAM_DIM=null", "config.DRIFTSTREAM_HASH_BITS=18"); !bytes.Contains(out, []byte("DRIFTSTREAM_HASH_BITS")) {
		t.Fatal("DRIFTSTREAM_HASH_BITS alone is refused")
	}
}

// The chart sets GOMEMLIMIT to 90% of the container's memory limit, or to
// what goMemLimit says, and refuses a limit it cannot read.
func TestHelmChartSetsGoMemLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		want string // "" for no GOMEMLIMIT
	}{
		{"default 2Gi limit", nil, "1932735283"},
		{"512Mi", []string{"resources.limits.memory=512Mi"}, "483183820"},
		{"decimal unit", []string{"resources.limits.memory=3G"}, "2700000000"},
		{"plain bytes", []string{"resources.limits.memory=1073741824"}, "966367641"},
		{"explicit", []string{"goMemLimit=1500MiB"}, "1500MiB"},
		{"off", []string{"goMemLimit=off"}, ""},
		{"no memory limit", []string{"resources.limits=null"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decodeStrict(t, render(t, tc.sets...))["Deployment"].(*appsv1.Deployment)
			got, n := "", 0
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "GOMEMLIMIT" {
					got, n = e.Value, n+1
				}
			}
			if got != tc.want || n > 1 {
				t.Fatalf("GOMEMLIMIT %q (%d entries), want %q", got, n, tc.want)
			}
		})
	}
	cmd := exec.Command(helm(t), "template", "rel", filepath.Join("..", "helm", "driftstream"), "--set", "resources.limits.memory=1.5Gi",
		"--set", strings.Join(dataValues, ","))
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `resources.limits.memory "1.5Gi": write a whole number with a unit`) {
		t.Fatalf("a memory limit the chart cannot read was accepted: %s", out)
	}
}

// The consumer's DRIFTSTREAM_INSTANCE_ID is the pod's name (the downward
// API) unless instanceIdFromPodName is off, in the Deployment and the
// StatefulSet alike.
func TestHelmChartSetsTheInstanceID(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		kind string
		want string // the field path; "" absent
	}{
		{"default", nil, "Deployment", "metadata.name"},
		{"stateful", []string{"keyStore.enabled=true", "keyStore.persistent.enabled=true"}, "StatefulSet", "metadata.name"},
		{"off", []string{"instanceIdFromPodName=false"}, "Deployment", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pod corev1.PodSpec
			switch w := decodeStrict(t, render(t, tc.sets...))[tc.kind].(type) {
			case *appsv1.Deployment:
				pod = w.Spec.Template.Spec
			case *appsv1.StatefulSet:
				pod = w.Spec.Template.Spec
			default:
				t.Fatalf("no %s rendered", tc.kind)
			}
			got, n := "", 0
			for _, e := range pod.Containers[0].Env {
				if e.Name == "DRIFTSTREAM_INSTANCE_ID" {
					n++
					if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
						got = e.ValueFrom.FieldRef.FieldPath
					}
				}
			}
			if got != tc.want || n > 1 {
				t.Fatalf("DRIFTSTREAM_INSTANCE_ID from %q (%d entries), want %q", got, n, tc.want)
			}
		})
	}
}

// keyStore.enabled mounts an emptyDir for the key stores and points
// DRIFTSTREAM_STATE_DIR at it, with the cache's size.
func TestHelmChartMountsTheKeyStore(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sets      []string
		env       map[string]string // "" absent
		sizeLimit string
	}{
		{"off by default", nil, map[string]string{"DRIFTSTREAM_STATE_DIR": "", "DRIFTSTREAM_CACHE_KEYS": ""}, ""},
		{"on", []string{"keyStore.enabled=true"}, map[string]string{"DRIFTSTREAM_STATE_DIR": "/var/lib/driftstream/keys", "DRIFTSTREAM_CACHE_KEYS": "100000"}, "20Gi"},
		{"sized", []string{"keyStore.enabled=true", "keyStore.cacheKeys=5000", "keyStore.sizeLimit=100Gi"},
			map[string]string{"DRIFTSTREAM_STATE_DIR": "/var/lib/driftstream/keys", "DRIFTSTREAM_CACHE_KEYS": "5000"}, "100Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decodeStrict(t, render(t, tc.sets...))["Deployment"].(*appsv1.Deployment)
			pod := d.Spec.Template.Spec
			env := map[string]string{}
			for _, e := range pod.Containers[0].Env {
				env[e.Name] = e.Value
			}
			for k, want := range tc.env {
				if env[k] != want {
					t.Errorf("%s = %q, want %q", k, env[k], want)
				}
			}
			mounted := ""
			for _, m := range pod.Containers[0].VolumeMounts {
				if m.Name == "keys" {
					mounted = m.MountPath
				}
			}
			size := ""
			for _, v := range pod.Volumes {
				if v.Name == "keys" && v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
					size = v.EmptyDir.SizeLimit.String()
				}
			}
			if mounted != tc.env["DRIFTSTREAM_STATE_DIR"] || size != tc.sizeLimit {
				t.Fatalf("keys volume mounted at %q with size limit %q; want %q, %q", mounted, size, tc.env["DRIFTSTREAM_STATE_DIR"], tc.sizeLimit)
			}
		})
	}
}

// keyStore.persistent renders a StatefulSet instead of the Deployment: the
// same pod, its key stores on a volume claim of its own (no emptyDir), and
// DRIFTSTREAM_PARK_STATE set so that they are parked at shutdown. Without
// keyStore.enabled it changes nothing.
func TestHelmChartParksStateOnAVolumeClaim(t *testing.T) {
	objs := decodeStrict(t, render(t, "keyStore.enabled=true", "keyStore.persistent.enabled=true", "keyStore.persistent.size=50Gi",
		"keyStore.persistent.storageClassName=fast-ssd"))
	if objs["Deployment"] != nil || objs["StatefulSet"] == nil {
		t.Fatalf("rendered %v; want a StatefulSet and no Deployment", slices.Sorted(maps.Keys(objs)))
	}
	ss := objs["StatefulSet"].(*appsv1.StatefulSet)
	pod := ss.Spec.Template.Spec
	env := map[string]string{}
	for _, e := range pod.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["DRIFTSTREAM_PARK_STATE"] != "true" || env["DRIFTSTREAM_STATE_DIR"] != "/var/lib/driftstream/keys" {
		t.Errorf("env %v: want DRIFTSTREAM_PARK_STATE=true and the state dir", env)
	}
	for _, v := range pod.Volumes {
		if v.Name == "keys" {
			t.Errorf("a pod volume named keys (%+v) hides the volume claim", v.VolumeSource)
		}
	}
	if len(ss.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("%d volume claim templates, want 1", len(ss.Spec.VolumeClaimTemplates))
	}
	claim := ss.Spec.VolumeClaimTemplates[0]
	if size := claim.Spec.Resources.Requests[corev1.ResourceStorage]; claim.Name != "keys" || size.String() != "50Gi" ||
		claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName != "fast-ssd" {
		t.Errorf("volume claim %s of %v in class %v; want keys, 50Gi, fast-ssd", claim.Name, claim.Spec.Resources.Requests, claim.Spec.StorageClassName)
	}
	if ss.Spec.ServiceName == "" || ss.Spec.Replicas == nil || *ss.Spec.Replicas != 2 {
		t.Errorf("serviceName %q, replicas %v", ss.Spec.ServiceName, ss.Spec.Replicas)
	}
	if objs := decodeStrict(t, render(t, "keyStore.persistent.enabled=true")); objs["Deployment"] == nil || objs["StatefulSet"] != nil {
		t.Error("keyStore.persistent without keyStore.enabled changed the workload")
	}
}

// collected records the descriptions of the collectors registered on it.
type collected struct{ names map[string]bool }

func (c *collected) Register(col prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { col.Describe(ch); close(ch) }()
	for d := range ch {
		if m := regexp.MustCompile(`fqName: "([a-z_]+)"`).FindStringSubmatch(d.String()); m != nil {
			c.names[m[1]] = true
		}
	}
	return nil
}
func (c *collected) MustRegister(cols ...prometheus.Collector) {
	for _, col := range cols {
		c.Register(col)
	}
}
func (c *collected) Unregister(prometheus.Collector) bool { return false }

// The chart's Grafana dashboard is valid JSON, every panel has a query,
// every driftstream metric it queries is one the service exports, and every
// query selects the namespace and pods of its variables (a cluster runs
// several deployments).
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	cm := decodeStrict(t, render(t, "grafanaDashboard.enabled=true"))["Dashboard"].(*corev1.ConfigMap)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct{ List []struct{ Name string } }
	}
	if err := json.Unmarshal([]byte(cm.Data["driftstream.json"]), &dash); err != nil || len(dash.Panels) < 8 {
		t.Fatalf("dashboard: %d panels, %v", len(dash.Panels), err)
	}
	var vars []string
	for _, v := range dash.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Contains(vars, "namespace") || !slices.Contains(vars, "pod") {
		t.Errorf("dashboard variables %v: want namespace and pod", vars)
	}
	exported := &collected{names: map[string]bool{}}
	if _, err := service.NewMetrics(exported); err != nil {
		t.Fatal(err)
	}
	exported.MustRegister(service.NewBuildInfo("v", "c"))
	used := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, ref := range regexp.MustCompile(`(driftstream_[a-z_]+)(\{[^}]*\})?`).FindAllStringSubmatch(tg.Expr, -1) {
				m := ref[1]
				if ref[2] != `{namespace="$namespace", pod=~"$pod"}` {
					t.Errorf("panel %q queries %s%s: want the namespace and pod variables' selector", p.Title, m, ref[2])
				}
				base := regexp.MustCompile(`_(bucket|count|sum)$`).ReplaceAllString(m, "")
				if !exported.names[base] {
					t.Errorf("panel %q queries %s, which the service does not export", p.Title, m)
				}
				used++
			}
		}
	}
	if used < 15 {
		t.Fatalf("only %d metric references", used)
	}
}

// The chart's alerting rules, as it renders them, pass promtool's check and
// the unit tests of rules_test.yaml: which alerts fire, with which labels
// and summaries, in the situations an on-call engineer meets (every member
// gone, one down, a crash loop, a member stuck unready, lag, an accuracy
// drop against the partition's own day, drift incidents). Debian's
// prometheus package has promtool; .ci/run installs it.
func TestPrometheusRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found: .ci/run installs Debian's prometheus package")
		}
		t.Skip("promtool not found; apt-get install prometheus")
	}
	objs := decodeStrict(t, render(t, "metrics.prometheusRule.enabled=true"))
	spec := objs["PrometheusRule"].(*monitoringv1.PrometheusRule).Spec
	rules, err := yaml.Marshal(spec) // {"groups": [...]}: a Prometheus rule file
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests, err := os.ReadFile("rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644), os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o644)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s\nrules:\n%s", strings.Join(args, " "), err, out, rules)
		}
	}
}
