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

{{/* The recommended labels (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/)
     of an object of one operator, `base` its app.kubernetes.io/name. Selectors use only
     app.kubernetes.io/name, as the plain manifests of deploy/ do, so upgrades never change a selector.
     Called with (dict "root" . "base" "etcd-backup-operator"). */}}
{{- define "etcd-operator.labels" -}}
app.kubernetes.io/name: {{ .base }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: etcd-operator
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* An operator's ServiceAccount name: its section's serviceAccount.name, else the operator's object
     name. Called with (dict "root" . "base" ... "values" <its section>). */}}
{{- define "etcd-operator.serviceAccountName" -}}
{{- $values := .values.serviceAccount | default dict -}}
{{- $values.name | default (include "etcd-operator.name" (dict "root" .root "base" .base)) -}}
{{- end }}
