{{/* The metrics Service, its ServiceMonitor, and the alert rules (a PrometheusRule): each optional. */}}
{{- define "operator.metrics" -}}
{{- $name := include "operator.fullname" . }}
{{- if or .Values.metrics.service.enabled .Values.metrics.serviceMonitor.enabled }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "operator.metricsJob" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "operator.labels" . | nindent 4 }}
spec:
  selector:
    {{- include "operator.selectorLabels" . | nindent 4 }}
  ports:
    - name: http-metrics
      port: 8081
      targetPort: http-metrics
      protocol: TCP
{{- end }}
{{- if .Values.metrics.serviceMonitor.enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ $name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "operator.labels" . | nindent 4 }}
    {{- with .Values.metrics.serviceMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "operator.selectorLabels" . | nindent 6 }}
  endpoints:
    - port: http-metrics
      path: /metrics
      interval: {{ .Values.metrics.serviceMonitor.interval }}
      # The metrics' own namespace label (a Typesense cluster's) wins over the target's (the
      # operator's), which would otherwise push it aside into exported_namespace.
      honorLabels: true
{{- end }}
{{- if .Values.prometheusRule.enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ $name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "operator.labels" . | nindent 4 }}
    {{- with .Values.prometheusRule.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- include "operator.alertGroups" . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The alert rules' groups (also what promtool tests): the ones every operator has, then the chart's own
(files/alerts.yaml, a template: it may use .Values and the job name).
*/}}
{{- define "operator.alertGroups" -}}
{{- $job := include "operator.metricsJob" . }}
{{- $for := .Values.prometheusRule.for }}
groups:
  - name: {{ .Chart.Name }}.operator
    rules:
      - alert: OperatorDown
        expr: absent(up{job="{{ $job }}"} == 1)
        for: {{ $for }}
        labels:
          severity: critical
          operator: {{ .Chart.Name }}
        annotations:
          summary: 'No replica of {{ .Chart.Name }} answers its /metrics.'
          description: 'Nothing reconciles its custom resources; kubectl -n {{ .Release.Namespace }} describe deployment {{ include "operator.fullname" . }} says why.'
      - alert: OperatorNotReady
        expr: sum(operator_leader{job="{{ $job }}"} * operator_watch_caches_synced{job="{{ $job }}"}) < 1
        for: {{ $for }}
        labels:
          severity: critical
          operator: {{ .Chart.Name }}
        annotations:
          summary: 'No replica of {{ .Chart.Name }} leads with synced watch caches.'
          description: 'Replicas answer, but none holds the Lease with every watch listed (RBAC that forbids a list, or an API server that does not answer); its log names the kind behind.'
      - alert: OperatorReconcileErrors
        expr: sum by (kind) (rate(operator_reconciles_total{job="{{ $job }}", result=~"error|invalid_spec"}[5m])) > 0
        for: {{ .Values.prometheusRule.reconcileErrorsFor }}
        labels:
          severity: warning
          operator: {{ .Chart.Name }}
        annotations:
          summary: '{{ "{{ $labels.kind }}" }} reconciles of {{ .Chart.Name }} keep failing.'
          description: 'The objects'' Warning Events and Ready condition say why (kubectl describe).'
{{- with .Files.Get "files/alerts.yaml" }}
{{ tpl . $ }}
{{- end }}
{{- end -}}
