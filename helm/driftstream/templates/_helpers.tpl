{{- define "driftstream.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "driftstream.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "driftstream.labels" -}}
app.kubernetes.io/name: {{ include "driftstream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "driftstream.selector" -}}
app.kubernetes.io/name: {{ include "driftstream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "driftstream.serviceAccount" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "driftstream.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
driftstream.goMemLimit is the value of GOMEMLIMIT, the Go runtime's soft
memory limit: .Values.goMemLimit when set ("off": none), otherwise 90% of
resources.limits.memory in bytes (none without a limit). Without it the
collector lets the heap grow to twice what is live, so a pod holding keys
near half its limit is killed by the kernel instead of collecting harder.
*/}}
{{- define "driftstream.goMemLimit" -}}
{{- $set := toString (default "" .Values.goMemLimit) -}}
{{- if $set -}}
{{- if ne $set "off" -}}{{ $set }}{{- end -}}
{{- else -}}
{{- $mem := "" -}}
{{- with .Values.resources }}{{ with .limits }}{{ with .memory -}}
{{- if kindIs "float64" . }}{{ $mem = printf "%.0f" . }}{{ else }}{{ $mem = toString . }}{{ end -}}
{{- end }}{{ end }}{{ end -}}
{{- if $mem -}}
{{- if not (regexMatch "^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$" $mem) -}}
{{- fail (printf "resources.limits.memory %q: write a whole number with a unit (e.g. 1536Mi), or set goMemLimit" $mem) -}}
{{- end -}}
{{- $n := regexFind "^[0-9]+" $mem | atoi -}}
{{- $unit := dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $bytes := mul $n (get $unit (trimPrefix (toString $n) $mem)) -}}
{{- div (mul $bytes 9) 10 -}}
{{- end -}}
{{- end -}}
{{- end -}}
