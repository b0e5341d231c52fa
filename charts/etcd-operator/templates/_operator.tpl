{{/*
One operator's objects: ServiceAccount, (Cluster)Role + binding for what it manages, the Role +
binding for its leader-election Lease, the Deployment, the metrics Service and (when asked) a
PodMonitor. Called with a dict:
  root     the chart's top context
  base     the operator's name in a release named etcd-operator (and its app.kubernetes.io/name)
  command  its console script
  values   its section of values.yaml (enabled, replicas, extraArgs, resources, scheduling,
           serviceAccount)
  rules    the RBAC rules (YAML list) for what it manages
  args     extra fixed arguments (YAML list or "")
  env      extra environment (YAML list or "")
  volumes  extra volumes (YAML list or ""); mounts: their volumeMounts
*/}}
{{- define "etcd-operator.operator" -}}
{{- $root := .root }}
{{- $name := include "etcd-operator.name" (dict "root" $root "base" .base) }}
{{- $ns := $root.Release.Namespace }}
{{- $labels := include "etcd-operator.labels" (dict "root" $root "base" .base) }}
{{- $account := include "etcd-operator.serviceAccountName" (dict "root" $root "base" .base "values" .values) }}
{{- if $root.Values.serviceAccount.create }}
{{- $accountAnnotations := merge (dict) ((.values.serviceAccount | default dict).annotations | default dict) $root.Values.serviceAccount.annotations }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $account }}
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
  {{- with $accountAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
---
{{- end }}
{{- if $root.Values.rbac.create }}
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ include "etcd-operator.roleKind" $root }}
metadata:
  name: {{ $name }}
  {{- include "etcd-operator.roleNamespace" $root }}
  labels:
    {{- $labels | nindent 4 }}
rules:
  {{- .rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ include "etcd-operator.roleKind" $root }}Binding
metadata:
  name: {{ $name }}
  {{- include "etcd-operator.roleNamespace" $root }}
  labels:
    {{- $labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: {{ include "etcd-operator.roleKind" $root }}
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $account }}
    namespace: {{ $ns }}
---
# Leader election: only its own Lease in the operator's namespace.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}-leader-election
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get", "create", "update", "delete"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}-leader-election
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}-leader-election
subjects:
  - kind: ServiceAccount
    name: {{ $account }}
    namespace: {{ $ns }}
---
{{- end }}
{{- /* Pod annotations: the scrape annotations and podAnnotations (podAnnotations win); pod labels:
       podLabels and the recommended labels (ours win: app.kubernetes.io/name is the selector). */}}
{{- $podAnnotations := dict }}
{{- if $root.Values.metrics.annotations }}
{{- $podAnnotations = include "etcd-operator.scrapeAnnotations" $root | fromYaml }}
{{- end }}
{{- $podAnnotations = merge (dict) $root.Values.podAnnotations $podAnnotations }}
{{- $podLabels := merge (dict) ($labels | fromYaml) $root.Values.podLabels }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
spec:
  replicas: {{ .values.replicas }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .base }}
  template:
    metadata:
      labels:
        {{- toYaml $podLabels | nindent 8 }}
      {{- with $podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ $account }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      containers:
        - name: {{ .base }}
          image: {{ include "etcd-operator.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: [{{ .command | quote }}]
          args:
            - {{ include "etcd-operator.watchArg" $root }}
            - --leader-elect
            - --http-address=$(POD_IP)
            {{- with .args }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- range .values.extraArgs }}
            - {{ . }}
            {{- end }}
          env:
            - name: POD_NAME
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
            - name: POD_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
            - name: POD_IP
              valueFrom: {fieldRef: {fieldPath: status.podIP}}
            - name: TMPDIR  # the writable in-memory volume below (the root filesystem is read-only)
              value: /tmp
            {{- with .env }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with $root.Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: http
              containerPort: 8080
          readinessProbe:
            httpGet: {path: /healthz, port: http}
            periodSeconds: 5
          livenessProbe:
            httpGet: {path: /healthz, port: http}
            initialDelaySeconds: 10
            periodSeconds: 10
            failureThreshold: 6
          resources:
            {{- toYaml .values.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.containerSecurityContext | nindent 12 }}
          volumeMounts:
            # etcd client certificates of TLS clusters are written here (in memory).
            - name: tmp
              mountPath: /tmp
            {{- with .mounts }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir: {medium: Memory, sizeLimit: 16Mi}
        {{- with .volumes }}
        {{- . | nindent 8 }}
        {{- end }}
      terminationGracePeriodSeconds: 30
      {{- with .values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .values.topologySpreadConstraints }}
      {{- /* A constraint without a labelSelector spreads this operator's own replicas. */}}
      {{- $constraints := list }}
      {{- range . }}
      {{- $constraint := deepCopy . }}
      {{- if not (hasKey $constraint "labelSelector") }}
      {{- $_ := set $constraint "labelSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" $.base)) }}
      {{- end }}
      {{- $constraints = append $constraints $constraint }}
      {{- end }}
      topologySpreadConstraints:
        {{- toYaml $constraints | nindent 8 }}
      {{- end }}
{{- if $root.Values.metrics.service }}
---
# /metrics of every replica, for Prometheus set-ups that discover Services/Endpoints.
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}-metrics
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
  {{- if $root.Values.metrics.annotations }}
  annotations:
    {{- include "etcd-operator.scrapeAnnotations" $root | nindent 4 }}
  {{- end }}
spec:
  selector:
    app.kubernetes.io/name: {{ .base }}
  ports:
    - name: http
      port: 8080
      targetPort: http
{{- end }}
{{- if $root.Values.metrics.podMonitor.enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
    {{- with $root.Values.metrics.podMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .base }}
  podMetricsEndpoints:
    - port: http
      path: /metrics
      interval: {{ $root.Values.metrics.podMonitor.interval }}
      {{- /* The operators' `namespace` label (a cluster's or backup's) must win over the target's. */}}
      honorLabels: true
{{- end }}
{{- end }}
