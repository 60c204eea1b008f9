{{/*
RBAC from the chart's files/rbac-rules.yaml, in one of two modes:
- watchNamespaces empty: one ClusterRole with every rule, bound cluster-wide;
- watchNamespaces listed: a Role with the namespaced rules in each watched namespace, and a ClusterRole
  with only the read-only rules on cluster-scoped kinds.
Rules under fixedNamespaces (a namespace of Kubernetes' own, such as kube-node-lease) are a Role in that
namespace in either mode. Leader election adds a Role for the Lease in the release's namespace. rbac.additionalRules (namespaced
rules, in either mode) adds what the chart's own rules do not grant: upstream's value of that name.
*/}}
{{- define "operator.rbac" -}}
{{- if .Values.rbac.create }}
{{- $rules := .Files.Get "files/rbac-rules.yaml" | fromYaml }}
{{- $_ := set $rules "namespaced" (concat $rules.namespaced (.Values.rbac.additionalRules | default list)) }}
{{- $name := include "operator.fullname" . }}
{{- $subjects := include "operator.subjects" . }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- include "operator.labels" . | nindent 4 }}
rules:
{{- if not .Values.watchNamespaces }}
{{- toYaml $rules.namespaced | nindent 2 }}
{{- end }}
{{- with $rules.cluster }}
{{- toYaml . | nindent 2 }}
{{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "operator.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  {{- $subjects | nindent 2 }}
{{- range $namespace := .Values.watchNamespaces }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  namespace: {{ $namespace }}
  labels:
    {{- include "operator.labels" $ | nindent 4 }}
rules:
{{- toYaml $rules.namespaced | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ $namespace }}
  labels:
    {{- include "operator.labels" $ | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
  {{- $subjects | nindent 2 }}
{{- end }}
{{- range $namespace, $fixed := $rules.fixedNamespaces }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  namespace: {{ $namespace }}
  labels:
    {{- include "operator.labels" $ | nindent 4 }}
rules:
{{- toYaml $fixed | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ $namespace }}
  labels:
    {{- include "operator.labels" $ | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
  {{- $subjects | nindent 2 }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}-leader-election
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "operator.labels" . | nindent 4 }}
rules:
  # One Lease, read and renewed by its holder, watched by a standby; created by the first replica.
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [{{ $name }}-leader]
    verbs: [get, patch, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}-leader-election
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "operator.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}-leader-election
subjects:
  {{- $subjects | nindent 2 }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "operator.subjects" -}}
- kind: ServiceAccount
  name: {{ include "operator.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}
