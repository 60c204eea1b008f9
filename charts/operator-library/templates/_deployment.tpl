{{- define "operator.deployment" -}}
{{- $name := include "operator.fullname" . }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "operator.labels" . | nindent 4 }}
spec:
  replicas: {{ .Values.replicas }}
  {{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
  {{- fail "replicas > 1 needs leaderElection.enabled: two replicas must never act on the same object" }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "operator.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "operator.selectorLabels" . | nindent 8 }}
      {{- with .Values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "operator.serviceAccountName" . }}
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      # A stopping leader finishes its reconciles, then releases its Lease.
      terminationGracePeriodSeconds: 30
      containers:
        - name: operator
          image: {{ include "operator.image" . | quote }}
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          command: [{{ .Values.command | quote }}]
          args:
            - --health-address=0.0.0.0:8081
            - --log-level={{ .Values.logLevel }}
            - --log-format={{ .Values.logFormat }}
            {{- if .Values.leaderElection.enabled }}
            - --leader-elect
            {{- end }}
            {{- range .Values.watchNamespaces }}
            - --namespace={{ . }}
            {{- end }}
          env:
            - name: OPERATOR_SUITE_LEADER_ELECTION_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: OPERATOR_SUITE_LEADER_ELECTION_LEASE
              value: {{ $name }}-leader
            {{- if (.Values.webhooks).enabled }}
            - name: OPERATOR_SUITE_WEBHOOK
              value: "true"
            - name: OPERATOR_SUITE_WEBHOOK_CERT_DIR
              value: /etc/webhook-tls
            {{- end }}
            {{- with .Values.backupJobs }}
            - name: OPERATOR_SUITE_BACKUP_IMAGE
              value: {{ default (include "operator.image" $) .image | quote }}
            {{- end }}
            {{- with .Values.releaseStorage }}
            - name: OPERATOR_SUITE_RELEASE_DIR
              value: {{ .mountPath }}/releases
            {{- end }}
            {{- with .Values.env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: http-metrics
              containerPort: 8081
              protocol: TCP
            {{- if (.Values.webhooks).enabled }}
            - name: https-webhook
              containerPort: 9443
              protocol: TCP
            {{- end }}
          livenessProbe:
            httpGet:
              path: /healthz
              port: http-metrics
            periodSeconds: 10
            failureThreshold: 3
          readinessProbe:
            httpGet:
              path: /readyz
              port: http-metrics
            periodSeconds: 5
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- with .Values.releaseStorage }}
            - name: releases
              mountPath: {{ .mountPath }}
            {{- end }}
            {{- if (.Values.webhooks).enabled }}
            - name: webhook-tls
              mountPath: /etc/webhook-tls
              readOnly: true
            {{- end }}
      volumes:
        # The writable places (the root filesystem is read-only): scratch files, and (the Cluster Stack
        # operator's) downloaded releases, on an emptyDir or a claim of the user's.
        - name: tmp
          emptyDir: {}
        {{- if (.Values.webhooks).enabled }}
        - name: webhook-tls
          secret:
            secretName: {{ include "operator.fullname" . }}-webhook-tls
        {{- end }}
        {{- with .Values.releaseStorage }}
        - name: releases
          {{- if .existingClaim }}
          persistentVolumeClaim:
            claimName: {{ .existingClaim }}
          {{- else }}
          emptyDir:
            {{- with .sizeLimit }}
            sizeLimit: {{ . }}
            {{- end }}
          {{- end }}
        {{- end }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- $lossSeconds := .Values.nodeLossTolerationSeconds }}
      {{- if or .Values.tolerations (not (kindIs "invalid" $lossSeconds)) }}
      tolerations:
        {{- if not (kindIs "invalid" $lossSeconds) }}
        # Evicted from a lost node sooner than Kubernetes' 300 s: its replacement starts elsewhere.
        {{- range list "node.kubernetes.io/not-ready" "node.kubernetes.io/unreachable" }}
        - key: {{ . }}
          operator: Exists
          effect: NoExecute
          tolerationSeconds: {{ int $lossSeconds }}
        {{- end }}
        {{- end }}
        {{- with .Values.tolerations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- end }}
      {{- with .Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if and .Values.spreadOverNodes (gt (int .Values.replicas) 1) }}
      # The standby on another node than the leader, where there is one: a lost node takes one replica.
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "operator.selectorLabels" . | nindent 14 }}
      {{- end }}
{{- if and (gt (int .Values.replicas) 1) (.Values.podDisruptionBudget).enabled }}
---
# A drain takes one replica at a time: the other keeps (or takes over) the Lease.
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "operator.labels" . | nindent 4 }}
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      {{- include "operator.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}
