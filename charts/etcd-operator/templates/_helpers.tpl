{{/* The image of every operator: repository:tag (tag defaults to the chart's appVersion). */}}
{{- define "etcd-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Which namespaces an operator watches: every one, or watchNamespace (default: the release's). */}}
{{- define "etcd-operator.watchArg" -}}
{{- if eq .Values.rbac.scope "cluster" -}}
--all-namespaces
{{- else if eq .Values.rbac.scope "namespace" -}}
--namespace={{ .Values.watchNamespace | default .Release.Namespace }}
{{- else -}}
{{- fail (printf "rbac.scope must be cluster or namespace, not %q" .Values.rbac.scope) -}}
{{- end -}}
{{- end }}

{{/* Role (namespace scope) or ClusterRole (cluster scope) for an operator's managed resources. */}}
{{- define "etcd-operator.roleKind" -}}
{{- if eq .Values.rbac.scope "namespace" }}Role{{ else }}ClusterRole{{ end -}}
{{- end }}

{{/* metadata.namespace of a namespaced-scope Role and its binding (nothing for cluster scope). */}}
{{- define "etcd-operator.roleNamespace" -}}
{{- if eq .Values.rbac.scope "namespace" }}
  namespace: {{ .Values.watchNamespace | default .Release.Namespace }}
{{- end -}}
{{- end }}

{{/* The pod template annotations Prometheus' pod discovery looks for (deploy/prometheus/scrape-config.yaml). */}}
{{- define "etcd-operator.scrapeAnnotations" -}}
prometheus.io/scrape: "true"
prometheus.io/port: "8080"
prometheus.io/path: /metrics
{{- end }}

{{/* An operator's object names: `base` (e.g. etcd-backup-operator) for a release named
     etcd-operator (the objects of deploy/), "<release>-<base>" otherwise, so releases never share
     cluster-wide names. Called with (dict "root" . "base" "etcd-backup-operator"). */}}
{{- define "etcd-operator.name" -}}
{{- if eq .root.Release.Name "etcd-operator" -}}
{{ .base }}
{{- else -}}
{{ printf "%s-%s" .root.Release.Name .base | trunc 63 | trimSuffix "-" }}
{{- end -}}
{{- end }}
