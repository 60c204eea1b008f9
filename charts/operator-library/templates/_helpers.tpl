{{/* The release's object names, labels and the pieces every operator chart shares. */}}

{{- define "operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "operator.serviceAccountName" -}}
{{- default (include "operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "operator.labels" -}}
{{ include "operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: operator-suite
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The metrics job's name, as a ServiceMonitor's scrape calls it: the alert rules select it. */}}
{{- define "operator.metricsJob" -}}
{{- printf "%s-metrics" (include "operator.fullname" .) -}}
{{- end -}}

{{- define "operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Every object of an operator chart, in order. */}}
{{- define "operator.all" -}}
{{ include "operator.serviceAccount" . }}
{{ include "operator.rbac" . }}
{{ include "operator.deployment" . }}
{{ include "operator.metrics" . }}
{{- end -}}
